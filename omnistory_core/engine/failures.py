"""Failures that explain themselves: where a component broke, what is recomputed, what stops a job.

* :func:`exception_failure` turns a component exception into a :class:`Failure` with its type,
  message and the innermost frame of the component's own code (``pkg/module.py:LINE``): the deepest
  traceback frame whose file belongs to the package of the component's class (or of a class it
  derives from), never the engine's.
* :func:`retry_mode` reads ``engine.retry_failures``: ``errors`` (default: stored ``model_error``,
  ``timeout`` and ``batch_pending`` failures are recomputed, deterministic ones such as an
  unparseable plan stay cached), ``all`` (every failure), ``none`` (nothing); ``true``/``false``
  mean ``all``/``none``.
* :class:`ComponentUnavailable`: a component that cannot run here (no API key, no package, no
  weights) fails its job with one line naming the component, the cause and the remedy.
* :class:`MissingOutputs`: ``engine.fail_on_missing=true`` and some output is missing.
* :class:`NothingProduced`: every output of the job is missing; whatever the setting, a system that
  made nothing is a broken run, not a result, and its job exits non-zero.
"""

from __future__ import annotations

import importlib.metadata as md
import inspect
import os
import re
import sys
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omnistory_core.components import ComponentError
from omnistory_core.contract import BATCH_PENDING, Failure
from omnistory_core.errors import ConfigError

#: the failure category of an output that breaks the contract (wrong type, a modality a backbone
#: does not declare in ``produces``): see :class:`ContractError`
CONTRACT_ERROR = "contract_error"

#: stored failure categories that ``retry_failures=errors`` recomputes: they say nothing about the
#: item (a crash, a bug since fixed, an API outage), unlike an unparseable plan or an empty output.
#: ``batch_pending``: the item's provider batch had not ended within ``batch_wait_s``; recomputing
#: it polls that batch (its id is in the store's batch ledger), it does not send it again.
#: ``contract_error``: the component returned the wrong type (a bug in its code, fixed without a
#: version bump as often as not), so it is recomputed like a crash.
TRANSIENT_CATEGORIES: frozenset[str] = frozenset(
    {"model_error", "timeout", BATCH_PENDING, CONTRACT_ERROR}
)
RETRY_MODES: tuple[str, ...] = ("errors", "all", "none")
DEFAULT_RETRY_MODE = "errors"


#: ``1``: every component exception's traceback is written to stderr as it is recorded (the CLI's
#: ``--verbose`` sets it); the traceback is kept in the records either way
VERBOSE_ENV = "OMNISTORY_VERBOSE"


def verbose() -> bool:
    """Whether ``OMNISTORY_VERBOSE`` asks for tracebacks on stderr."""
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def show_traceback(what: str, failure: Mapping[str, Any] | Failure | None) -> None:
    """Under ``OMNISTORY_VERBOSE=1``, write ``what`` and the failure's traceback to stderr (only
    a failure that has one: a component exception's)."""
    if failure is None or not verbose():
        return
    data = failure.to_dict() if isinstance(failure, Failure) else dict(failure)
    text = data.get("traceback")
    if not text:
        return
    sys.stderr.write(f"omnistory: {what}:\n{text}")
    sys.stderr.flush()


class ContractError(TypeError):
    """A component returned something its kind's contract does not allow (the wrong type for a
    field, a modality a backbone does not declare).  ``where`` is the component's method that
    returned it, as ``file:line``; it becomes a ``contract_error`` failure of the call."""

    def __init__(self, message: str, where: str | None = None):
        super().__init__(message)
        self.where = where


class ComponentUnavailable(ConfigError):
    """A component that cannot load here (missing key, package or weights): its job stops before
    any example is processed (a sweep records it in that job's ``job_error.json``)."""


class MissingOutputs(ConfigError):
    """``engine.fail_on_missing=true`` and the job has missing outputs (its outputs are written)."""


class NothingProduced(MissingOutputs):
    """Every output of the job is missing (records, ``missing.txt`` and manifest are written)."""


def retry_mode(value: Any) -> str:
    """``engine.retry_failures`` as one of :data:`RETRY_MODES` (booleans kept for old configs)."""
    if value is True:
        return "all"
    if value is False or value is None:
        return "none"
    text = str(value).strip().lower()
    aliases = {"true": "all", "false": "none", "null": "none"}
    text = aliases.get(text, text)
    if text not in RETRY_MODES:
        raise ConfigError(
            f"engine.retry_failures must be one of {', '.join(RETRY_MODES)} (true/false: all/none),"
            f" got {value!r}"
        )
    return text


def should_recompute(failure: Mapping[str, Any] | None, mode: str) -> bool:
    """Whether a stored failure is recomputed under ``mode``."""
    if mode == "all":
        return True
    if mode == "none":
        return False
    return str((failure or {}).get("category", "model_error")) in TRANSIENT_CATEGORIES


# -- where the component's code broke ----------------------------------------------------------
def _code_roots(owner: type | None) -> list[tuple[str, str]]:
    """(directory or file that is the component's code, base its paths are shown relative to).

    A plugin's code is its top-level package (or single module); a class inside omnistory_core is
    only its own subpackage (``omnistory_core/builtin``), so engine frames never count."""
    if owner is None:
        return []
    roots: list[tuple[str, str]] = []
    for cls in owner.__mro__:
        module_name = getattr(cls, "__module__", "") or ""
        if module_name in ("builtins", "omnistory_core.components") or cls is object:
            continue
        module = sys.modules.get(module_name)
        file = getattr(module, "__file__", None)
        if not file:
            continue
        file = os.path.realpath(file)
        top = module_name.split(".")[0]
        if top == "omnistory_core":
            package_dir = os.path.dirname(os.path.realpath(sys.modules[top].__file__ or file))
            root = os.path.dirname(file)
            if root == package_dir:  # a module directly in omnistory_core: that file only
                root = file
            base = os.path.dirname(package_dir)
        elif "." in module_name:
            top_module = sys.modules.get(top)
            top_file = getattr(top_module, "__file__", None)
            root = (
                os.path.dirname(os.path.realpath(top_file)) if top_file else os.path.dirname(file)
            )
            base = os.path.dirname(root)
        elif os.path.basename(file) == "__init__.py":
            root = os.path.dirname(file)
            base = os.path.dirname(root)
        else:  # a single-module plugin
            root, base = file, os.path.dirname(file)
        if (root, base) not in roots:
            roots.append((root, base))
    return roots


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def code_location(exc: BaseException, owner: type | None) -> str | None:
    """``pkg/module.py:LINE`` of the innermost frame of ``owner``'s own code in the traceback of
    ``exc`` (or of the exception it was raised from), or ``None`` when its code is not on it."""
    roots = _code_roots(owner)
    if not roots:
        return None
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = None
        for frame, lineno in traceback.walk_tb(current.__traceback__):
            path = os.path.realpath(frame.f_code.co_filename)
            for root, base in roots:
                if _inside(path, root):
                    found = (Path(os.path.relpath(path, base)).as_posix(), lineno)
                    break
        if found is not None:
            return f"{found[0]}:{found[1]}"
        current = current.__cause__ or current.__context__
    return None


def method_location(owner: type | None) -> str | None:
    """``pkg/module.py:LINE`` of the method of ``owner`` that returns its outputs: the
    ``run_batch``, ``run_one`` or ``generate`` of the most derived class that defines one (the
    plugin author's own code before any base class of omnistory_core's), else the class itself.
    What a contract error points at: the value came back from there, no frame of it is left."""
    if owner is None:
        return None
    classes = [c for c in owner.__mro__ if c.__module__ != "omnistory_core.components"]
    classes = [c for c in classes if c is not object]
    own = [c for c in classes if not c.__module__.startswith("omnistory_core.")]
    for cls in own + [c for c in classes if c not in own]:
        for name in ("run_batch", "run_one", "generate"):
            func = cls.__dict__.get(name)
            code = getattr(func, "__code__", None)
            if code is not None:
                return _relative(code.co_filename, code.co_firstlineno, owner)
    try:
        file = inspect.getsourcefile(owner)
        line = inspect.getsourcelines(owner)[1]
    except (OSError, TypeError):
        return None
    return _relative(file, line, owner) if file else None


def _relative(file: str, line: int, owner: type) -> str:
    """``file:line`` relative to the package root of ``owner``'s code (as ``where`` is shown),
    or the full path when the file is outside it."""
    path = os.path.realpath(file)
    for root, base in _code_roots(owner):
        if _inside(path, root):
            return f"{Path(os.path.relpath(path, base)).as_posix()}:{line}"
    return f"{path}:{line}"


def exception_failure(exc: BaseException, owner: type | None = None) -> Failure:
    """The failure an exception raised by a component becomes; ``owner`` (the component's class)
    lets it say where the component's own code broke.  The full traceback is kept with it."""
    kind = type(exc).__name__
    if isinstance(exc, ContractError):  # raised by the engine's checks: its frames are not news
        return Failure(CONTRACT_ERROR, str(exc), exception=kind, where=exc.where)
    where = code_location(exc, owner)
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, ComponentError):
        return Failure(exc.category, str(exc), exception=kind, where=where, traceback=text)
    category = "timeout" if isinstance(exc, TimeoutError) else "model_error"
    return Failure(category, f"{kind}: {exc}", exception=kind, where=where, traceback=text)


# -- components that cannot run here ----------------------------------------------------------
#: import names whose distribution is called otherwise (the common ones; anything else is looked
#: for under its own name, ``_`` and ``-`` alike)
IMPORT_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "PIL": ("pillow",),
    "cv2": ("opencv-python", "opencv-python-headless", "opencv-contrib-python"),
    "sklearn": ("scikit-learn",),
    "skimage": ("scikit-image",),
    "yaml": ("pyyaml",),
    "bs4": ("beautifulsoup4",),
    "attr": ("attrs",),
    "dateutil": ("python-dateutil",),
    "google": ("protobuf", "google-genai", "google-generativeai"),
    "Crypto": ("pycryptodome",),
    "fitz": ("pymupdf",),
    "sentencepiece": ("sentencepiece",),
    "pkg_resources": ("setuptools",),
}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distribution_names(module: str) -> set[str]:
    """The distribution names that may provide the top-level import ``module``."""
    return {_normalized(n) for n in (module, *IMPORT_DISTRIBUTIONS.get(module, ()))}


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return _normalized(match.group(1)) if match else ""


def _missing_module(exc: ImportError) -> str | None:
    """The top-level module an ImportError is about (``No module named 'a.b'`` -> ``a``)."""
    name = getattr(exc, "name", None)
    if not name:
        match = re.search(r"No module named '([^']+)'", str(exc))
        name = match.group(1) if match else None
    return name.split(".")[0] if name else None


def _plugin_distributions(cls: type) -> list[str]:
    """The installed distributions that hold ``cls``'s top-level package."""
    top = (cls.__module__ or "").split(".")[0]
    try:
        return list(dict.fromkeys(md.packages_distributions().get(top, [])))
    except Exception:  # noqa: BLE001 - broken metadata elsewhere: no suggestion from it
        return []


def _extra_of(requirement: str) -> str | None:
    match = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", requirement)
    return match.group(1) if match else None


def import_remedy(component: Any, exc: BaseException, module: str | None = None) -> str:
    """What would install the module an ``ImportError`` of ``component``'s ``load()`` (or
    ``preflight()``) misses, and nothing that would not:

    * a requirement the component declares (``requirements``, what ``env create`` installs):
      ``pip install`` it here, or ``env create`` the component's own environment, which has it;
    * an extra (or a dependency) of the component's distribution that provides it:
      ``pip install "dist[extra]"``;
    * else the distribution that provides the module, by its usual name; ``env create`` is not
      suggested, since the environment it makes would lack the module just the same.

    A component isolated in its own environment (``runner.python``) is told to install into
    that one, with its interpreter; ``module``: the missing module when ``exc`` is the worker's
    report of it rather than the ImportError itself."""
    label = f"{component.kind}={component.name}"
    cls = type(getattr(component, "_component", component))
    module = module or (_missing_module(exc) if isinstance(exc, ImportError) else None)
    isolated = "_component" in vars(component) and isinstance(vars(component).get("python"), str)
    where = f"{label}'s environment" if isolated else "this environment"
    pip = f"{vars(component)['python']} -m pip install" if isolated else "pip install"
    if module is None:
        return f"install the missing package into {where} (see the error), then re-run"
    names = _distribution_names(module)
    for requirement in getattr(cls, "requirements", ()) or ():
        if _requirement_name(str(requirement)) in names:
            remedy = (
                f'install it into {where}: {pip} "{requirement}" (a requirement {label} declares)'
            )
            if not isolated:  # an environment of its own would have it
                remedy += (
                    f", or run {label} in its own: `python -m omnistory_core env create {label}`"
                )
            return remedy
    for dist in _plugin_distributions(cls):
        try:
            requires = md.requires(dist) or []
        except md.PackageNotFoundError:
            continue
        for requirement in requires:
            if _requirement_name(requirement) not in names:
                continue
            extra = _extra_of(requirement)
            if extra:
                return f'install the extra of {dist} that provides it: {pip} "{dist}[{extra}]"'
            spec = requirement.split(";")[0].strip()
            return f'install it into {where}: {pip} "{spec}" (a dependency of {dist})'
    guess = (IMPORT_DISTRIBUTIONS.get(module) or (module.replace("_", "-"),))[0]
    return (
        f"install the distribution that provides the module {module!r} into {where}"
        f" (e.g. {pip} {guess}), then re-run"
    )


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def unavailable_message(component: Any, exc: BaseException) -> str:
    """One line: the component, why it cannot run here, and what to do about it."""
    label = f"{component.kind}={component.name}"
    if isinstance(exc, ComponentError):
        cause, remedy = str(exc), ""  # a component's own error carries its remedy
        # ... except an isolation worker's report that the component's load() missed a module
        missing = re.search(r"(?:ModuleNotFound|Import)Error: No module named '([^']+)'", cause)
        if missing and "_component" in vars(component):
            remedy = import_remedy(component, exc, missing.group(1).split(".")[0])
    else:
        cause = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, ImportError):
            remedy = import_remedy(component, exc)
        elif isinstance(exc, OSError):
            remedy = "check the path and that the weights are downloaded, then re-run"
        else:
            remedy = "fix the cause and re-run (nothing was computed with it)"
    for prefix in (f"{label}: ", f"{component.kind}/{component.name}: "):
        if cause.startswith(prefix):
            cause = cause[len(prefix) :]
    # a ComponentError is the component's own diagnosis; anything else is a bug to locate
    where = None
    if not isinstance(exc, ComponentError):
        where = code_location(exc, type(getattr(component, "_component", component)))
    if where:
        cause = f"{cause} (at {where})"
    return _one_line(f"{label} cannot run: {cause}" + (f"; {remedy}" if remedy else ""))


def preflight(components: Iterable[Any]) -> list[tuple[Any, BaseException]]:
    """Each component's cheap ``preflight()`` check (API key set, package installed, weights
    present), if it has one; returns the components that fail it with their exception."""
    failed: list[tuple[Any, BaseException]] = []
    for component in components:
        check = getattr(component, "preflight", None)
        if not callable(check):
            continue
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - reported as one line by the caller
            failed.append((component, exc))
            owner = type(getattr(component, "_component", component))
            label = f"{component.kind}={component.name}"
            show_traceback(f"{label} failed its preflight check", exception_failure(exc, owner))
    return failed


# -- missing outputs -----------------------------------------------------------------------
def check_missing(
    missing: Mapping[str, int], fail_on_missing: Any, expected: int | None = None
) -> None:
    """Raise :class:`NothingProduced` when all ``expected`` outputs are missing, and
    :class:`MissingOutputs` when ``engine.fail_on_missing`` is set and any is missing."""
    total = sum(int(n) for n in missing.values())
    if expected and total >= expected:
        counts = ", ".join(f"{m} {n}" for m, n in missing.items())
        raise NothingProduced(
            f"every output is missing ({counts}): the system made nothing; the cause of each is in"
            " missing.txt in the job directory and in the failure summary above"
        )
    if not fail_on_missing:
        return
    if total:
        counts = ", ".join(f"{m} {n}" for m, n in missing.items())
        raise MissingOutputs(
            f"{total} output(s) missing ({counts}) and engine.fail_on_missing=true; see"
            " missing.txt in the job directory"
        )
