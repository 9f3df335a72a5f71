"""Model code that exists only as a git repository: one declarative :class:`Checkout` per model.

Several omnimodal models (MMaDA, AnyGPT, Omni-Diffusion, Dynin-Omni, Emu3's processor) need code
that is neither on PyPI nor in their hub checkpoints.  Nothing of it is vendored: the user clones
the repository at the pinned commit and passes its directory as ``<group>.source_dir`` (or the
environment variable ``OMNISTORY_SOURCE_<GROUP>_<NAME>`` the shipped config reads).  What every
such plugin needs is here, once:

* :meth:`Checkout.check_dir` -- the directory exists and holds the files the plugin imports, or a
  one-line :class:`CheckoutError` naming the parameter and the git commands that get it (the CLI
  prints it as the configuration error, before anything loads);
* :meth:`Checkout.digest` -- the code's identity in the cache key, by content: the checkout's path
  differs between machines, the code does not;
* :func:`git_revision` -- the checked-out commit, read from ``.git`` without running git (a model's
  environment may have no git), so a plugin can warn when it is not the pinned one;
* :meth:`Checkout.import_modules` -- import modules from the checkout.  Upstream repositories use
  generic top-level names (``models``, ``training``, ``utils``); same-named modules imported from
  somewhere else (another model's checkout, another copy of this one) are dropped from
  ``sys.modules`` first, so the names always resolve to this checkout;
* :class:`CheckoutBackbone` -- the backbone side of it: the checkout checked when the component is
  built, its code's digest in the cache key, a warning when it is not at the pinned commit, one
  error message for code that does not import, the commit recorded with every result.

No third-party import: plugins build their :class:`Checkout` at import time, and
``import omnistory_core`` must stay light (the core modules used here import the standard library
only).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, TypeVar

from omnistory_core.components import Backbone, ComponentError
from omnistory_core.kit.diffusion import SettingsError
from omnistory_core.params import Param, ParamError

__all__ = [
    "Checkout",
    "CheckoutBackbone",
    "CheckoutError",
    "drop_foreign_modules",
    "git_revision",
    "module_inside",
    "source_env",
    "tree_digest",
]


log = logging.getLogger("omnistory")

T = TypeVar("T")


class CheckoutError(ValueError):
    """``source_dir`` is missing or not a usable checkout.  The message is one line: plugins turn
    it into a ``ConfigError`` (exit 2) or a ``ComponentError`` as it is."""


def source_env(component: str) -> str:
    """The environment variable the shipped config reads ``source_dir`` from:
    ``"backbone=mmada"`` -> ``OMNISTORY_SOURCE_BACKBONE_MMADA`` (one scheme for every plugin, so
    users can guess it)."""
    group, _, name = component.partition("=")
    return "OMNISTORY_SOURCE_" + re.sub(r"[^A-Za-z0-9]+", "_", f"{group}_{name}").upper()


@dataclass(frozen=True)
class Checkout:
    """A git repository a plugin imports code from, and how to check, identify and import it.

    Paths (``required_files``, ``digest_dirs``, ...) are relative to the checkout's root, with
    ``/`` separators.
    """

    #: ``"<group>=<name>"`` as users type it; prefixes every message and names the parameter
    component: str
    #: the project's name, e.g. ``"MMaDA"``: messages say "MMaDA's model code", and the suggested
    #: commands clone into a directory of this name
    name: str
    #: the URL the suggested ``git clone`` uses
    repository: str
    #: the commit the plugin was written and checked against
    commit: str
    #: files the plugin imports; checked by :meth:`check_dir` before anything loads
    required_files: tuple[str, ...] = ()
    #: directories that must exist too (e.g. a submodule the imported code needs)
    required_dirs: tuple[str, ...] = ()
    #: top-level module names the checkout provides (see :meth:`import_modules`)
    packages: tuple[str, ...] = ()
    #: folders whose ``*.py`` files (recursively) identify the code in the cache key
    digest_dirs: tuple[str, ...] = ()
    #: single files that identify the code in the cache key, after those of ``digest_dirs``
    digest_files: tuple[str, ...] = ()
    #: ``sys.path`` entries put first, highest priority first (``"."`` is the root)
    path_first: tuple[str, ...] = (".",)
    #: ``sys.path`` entries appended when absent (lowest priority: generic sub-package names)
    path_last: tuple[str, ...] = ()
    #: further ``git -C <dir> ...`` commands after the checkout, e.g. submodules
    git_steps: tuple[str, ...] = ()
    #: what the repository holds, for "``<name>``'s ``<code>`` is a git repository"
    code: str = "model code"
    #: the component parameter that holds the directory
    param: str = "source_dir"

    # -- names ---------------------------------------------------------------------------------
    @property
    def parameter(self) -> str:
        """The parameter as users type it, e.g. ``backbone.source_dir``."""
        return f"{self.component.partition('=')[0]}.{self.param}"

    @property
    def env(self) -> str:
        """The environment variable the shipped config reads the directory from."""
        return source_env(self.component)

    @property
    def slug(self) -> str:
        """``owner/name`` of the repository, e.g. ``Gen-Verse/MMaDA``."""
        path = self.repository.rstrip("/").removesuffix(".git")
        return "/".join(path.split("/")[-2:])

    def commands(self) -> str:
        """The shell commands that produce the checkout (in a directory named :attr:`name`)."""
        steps = [
            f"git clone {self.repository} {self.name}",
            f"git -C {self.name} checkout {self.commit}",
            *(f"git -C {self.name} {step}" for step in self.git_steps),
        ]
        return " && ".join(steps)

    def get_it(self) -> str:
        """How to get the checkout and pass it, as the tail of one-line error messages."""
        return (
            f"get it with `{self.commands()}` and pass {self.parameter}=$PWD/{self.name} "
            f"(or export {self.env}=$PWD/{self.name})"
        )

    def declaration(self, doc: str | None = None) -> Param:
        """The component parameter that holds the directory: required, runtime-only (the key
        holds the code's digest instead), documented by ``doc`` or as the checkout of
        :attr:`slug`."""
        doc = doc or f"checkout of {self.slug} (required; the key hashes its code)"
        return Param(self.param, str, None, doc, runtime=True)

    # -- checking ------------------------------------------------------------------------------
    def locate(self, value: Any) -> Path:
        """``value`` as a directory (not resolved), or a :class:`CheckoutError` when it is unset,
        not a path or not a directory.  The contents are not checked (see :meth:`missing`)."""
        if value is None or (isinstance(value, str) and not value.strip()):
            raise CheckoutError(
                f"{self.component}: {self.parameter} is not set; {self.name}'s {self.code} is a "
                f"git repository, {self.get_it()}"
            )
        if not isinstance(value, str | os.PathLike):
            raise CheckoutError(f"{self.component}: {self.parameter} must be a path, got {value!r}")
        path = Path(value).expanduser()
        if not path.is_dir():
            raise CheckoutError(
                f"{self.component}: {self.parameter}={str(value)!r} is not a directory; "
                f"{self.get_it()}"
            )
        return path

    def missing(self, path: Path) -> list[str]:
        """The required files and directories ``path`` lacks, in declaration order."""
        absent = [name for name in self.required_files if not (path / name).is_file()]
        return absent + [name for name in self.required_dirs if not (path / name).is_dir()]

    def check_dir(self, value: Any) -> Path:
        """The checkout's resolved directory, or a one-line :class:`CheckoutError` naming the
        parameter, what is wrong and the commands that get a checkout."""
        path = self.locate(value)
        absent = self.missing(path)
        if absent:
            raise CheckoutError(
                f"{self.component}: {self.parameter}={str(value)!r} is not a checkout of "
                f"{self.slug} (no {', '.join(absent)}); {self.get_it()}"
            )
        return path.resolve()

    # -- identity ------------------------------------------------------------------------------
    def digest(self, root: Path) -> str:
        """SHA-256 over the code of ``digest_dirs`` and ``digest_files`` (:func:`tree_digest`)."""
        return tree_digest(root, self.digest_dirs, self.digest_files)

    # -- importing -----------------------------------------------------------------------------
    def search_path(self, root: Path) -> tuple[list[str], list[str]]:
        """(``sys.path`` entries put first, entries appended) for the checkout at ``root``."""
        root = Path(root)
        return (
            [os.path.normpath(root / entry) for entry in self.path_first],
            [os.path.normpath(root / entry) for entry in self.path_last],
        )

    def import_modules(self, root: Path, *names: str) -> tuple[ModuleType, ...]:
        """Import ``names`` (dotted module names) from the checkout at ``root``.

        Modules of the checkout's :attr:`packages` imported from anywhere else are dropped from
        ``sys.modules`` first; the checkout's entries go first on ``sys.path`` (those of
        :attr:`path_last` last) and stay there, since upstream code imports lazily too.
        """
        root = Path(root).resolve()
        drop_foreign_modules(self.packages, root)
        first, last = self.search_path(root)
        for entry in reversed(first):
            if entry in sys.path:
                sys.path.remove(entry)
            sys.path.insert(0, entry)
        for entry in last:
            if entry not in sys.path:
                sys.path.append(entry)
        importlib.invalidate_caches()
        return tuple(importlib.import_module(name) for name in names)


class CheckoutBackbone(Backbone):
    """A backbone whose model code is imported from a :class:`Checkout`.

    Building one checks its settings (:meth:`check`) and its checkout (:meth:`check_source_dir`),
    either failing as one :class:`~omnistory_core.params.ParamError` line (a configuration error,
    before anything loads); then takes the code's digest (``source_digest``, the cache key's
    ``source_tree``: the directory differs between machines, the code does not) and the
    checked-out commit (``source_revision``, recorded with every result by
    :meth:`record_revision`).  ``load()`` calls :meth:`warn_if_unpinned` and
    :meth:`import_checkout`.
    """

    #: the git repository the model code comes from
    checkout: ClassVar[Checkout]
    #: appended to the "not the pinned commit" warning, e.g. where the pin comes from
    pin_note: ClassVar[str] = ""
    #: how to run in an environment where the checkout's code imports (the import error's
    #: advice); empty: build it with ``env create`` and point ``runner.python`` at it
    environment_hint: ClassVar[str] = ""

    def __init__(self, **params: Any):
        super().__init__(**params)
        try:
            self.settings = self.check(self.params)
            self.source_dir = self.check_source_dir(self.params[self.checkout.param])
        except (SettingsError, CheckoutError) as exc:
            raise ParamError(str(exc)) from None
        self.source_digest = self.checkout.digest(self.source_dir)
        self.source_revision = git_revision(self.source_dir)
        self.upstream: Any = None

    @classmethod
    def check(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        """The settings from the declared parameters; a :class:`SettingsError` names the first
        bad one."""
        raise NotImplementedError

    @classmethod
    def check_source_dir(cls, value: Any) -> Path:
        """The checkout's resolved directory, or a one-line :class:`CheckoutError`."""
        return cls.checkout.check_dir(value)

    # -- identity ------------------------------------------------------------------------------
    def unkeyed_settings(self) -> set[str]:
        """Settings that change no output, so stay out of the cache key: the runtime ones."""
        return set(self.runtime_params)

    def output_params(self) -> dict[str, Any]:
        """The effective settings and the checkout's code by content."""
        skip = self.unkeyed_settings()
        params = {k: v for k, v in sorted(self.settings.items()) if k not in skip}
        params["source_tree"] = self.source_digest
        return params

    def record_revision(self, usage: dict[str, Any]) -> None:
        """Put the checked-out commit, when known, into a result's ``usage``."""
        if self.source_revision:
            usage["source_revision"] = self.source_revision

    # -- loading -------------------------------------------------------------------------------
    def warn_if_unpinned(self) -> None:
        """Warn when the checkout is known to be at another commit than the pinned one."""
        revision, pinned = self.source_revision, self.checkout.commit
        if revision and not revision.startswith(pinned):
            log.warning(
                f"{self.checkout.component}: %s is at commit %s, not %s{self.pin_note}",
                self.source_dir,
                revision[:12],
                pinned[:12],
            )

    def import_checkout(self, import_upstream: Callable[[Path], T]) -> T:
        """``import_upstream(source_dir)``; whatever it raises becomes a :class:`ComponentError`
        that says which environment to run in and how to complete the checkout."""
        c = self.checkout
        try:
            return import_upstream(self.source_dir)
        except Exception as exc:
            group = c.component.partition("=")[0]
            hint = self.environment_hint or (
                f"build its environment with `python -m omnistory_core env create {c.component}`"
                f" and run with {group}.runner.python=<that venv>/bin/python"
            )
            raise ComponentError(
                f"{c.component}: cannot import {c.name}'s code from {c.param}={self.source_dir}: "
                f"{type(exc).__name__}: {exc} -- {hint}; if the checkout is incomplete, "
                f"{c.get_it()}"
            ) from exc


# -- pure helpers ------------------------------------------------------------------------------


def tree_digest(root: Path, dirs: Iterable[str] = (), files: Iterable[str] = ()) -> str:
    """SHA-256 over (relative path, SHA-256 of the bytes) of every ``*.py`` under each of ``dirs``
    (sorted per folder, folders in the given order; ``__pycache__`` and ``.git`` skipped) and then
    of each of ``files``.  Relative paths keep the value equal across machines and checkouts of
    the same code; a missing folder contributes nothing, a missing file raises ``OSError``."""
    root = Path(root)
    paths: list[Path] = []
    for folder in dirs:
        paths += sorted(
            p
            for p in (root / folder).rglob("*.py")
            if p.is_file() and not {"__pycache__", ".git"} & set(p.relative_to(root).parts)
        )
    paths += [root / name for name in files]
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _git_dir(root: Path) -> Path | None:
    git = root / ".git"
    if git.is_file():  # a linked worktree or a submodule: "gitdir: <path>"
        try:
            text = git.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not text.startswith("gitdir:"):
            return None
        return (root / text.split(":", 1)[1].strip()).resolve()
    return git


def _read_ref(git: Path, ref: str) -> tuple[bool, str | None]:
    """(found, sha) of ``ref`` in the loose refs, then the packed refs, of the git dir ``git``."""
    loose = git / ref
    if loose.is_file():
        try:
            return True, loose.read_text(encoding="utf-8").strip() or None
        except OSError:
            return True, None
    try:
        packed = (git / "packed-refs").read_text(encoding="utf-8")
    except OSError:
        return False, None
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref and not sha.startswith(("#", "^")):
            return True, sha.strip()
    return False, None


def git_revision(root: Path) -> str | None:
    """The commit checked out in ``root``, read from ``.git`` without running git, or None.

    Handles a detached HEAD, loose and packed branch refs, and ``.git`` files (submodules, linked
    worktrees, whose branches live in the main repository's ``commondir``).
    """
    git = _git_dir(Path(root))
    if git is None:
        return None
    try:
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head or None
    ref = head.split(":", 1)[1].strip()
    stores = [git]
    try:
        common = (git / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        common = ""
    if common:
        stores.append((git / common).resolve())
    for store in stores:
        found, sha = _read_ref(store, ref)
        if found:
            return sha
    return None


def module_inside(module: Any, root: Path) -> bool:
    """Whether ``module`` was imported from under ``root`` (its file, or for a namespace package
    one of its ``__path__`` entries).  ``root`` must be resolved."""
    file = getattr(module, "__file__", None)
    paths = [file] if file else list(getattr(module, "__path__", None) or [])
    for entry in paths:
        try:
            Path(entry).resolve().relative_to(root)
        except (ValueError, OSError, TypeError):
            continue
        return True
    return False


def drop_foreign_modules(packages: Sequence[str], root: Path) -> list[str]:
    """Drop from ``sys.modules`` the modules of the top-level ``packages`` (and their submodules)
    that were not imported from under ``root``; return their names.  The next import of such a
    name then resolves through ``sys.path``, i.e. to the checkout put first there."""
    root = Path(root).resolve()
    dropped = [
        name
        for name, module in list(sys.modules.items())
        if name.split(".", 1)[0] in packages and not module_inside(module, root)
    ]
    for name in dropped:
        del sys.modules[name]
    return dropped
