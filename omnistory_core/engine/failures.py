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

import os
import sys
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omnistory_core.components import ComponentError
from omnistory_core.contract import BATCH_PENDING, Failure
from omnistory_core.errors import ConfigError

#: stored failure categories that ``retry_failures=errors`` recomputes: they say nothing about the
#: item (a crash, a bug since fixed, an API outage), unlike an unparseable plan or an empty output.
#: ``batch_pending``: the item's provider batch had not ended within ``batch_wait_s``; recomputing
#: it polls that batch (its id is in the store's batch ledger), it does not send it again.
TRANSIENT_CATEGORIES: frozenset[str] = frozenset({"model_error", "timeout", BATCH_PENDING})
RETRY_MODES: tuple[str, ...] = ("errors", "all", "none")
DEFAULT_RETRY_MODE = "errors"


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


def exception_failure(exc: BaseException, owner: type | None = None) -> Failure:
    """The failure an exception raised by a component becomes; ``owner`` (the component's class)
    lets it say where the component's own code broke."""
    where = code_location(exc, owner)
    kind = type(exc).__name__
    if isinstance(exc, ComponentError):
        return Failure(exc.category, str(exc), exception=kind, where=where)
    category = "timeout" if isinstance(exc, TimeoutError) else "model_error"
    return Failure(category, f"{kind}: {exc}", exception=kind, where=where)


# -- components that cannot run here ----------------------------------------------------------
def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def unavailable_message(component: Any, exc: BaseException) -> str:
    """One line: the component, why it cannot run here, and what to do about it."""
    label = f"{component.kind}={component.name}"
    if isinstance(exc, ComponentError):
        cause, remedy = str(exc), ""  # a component's own error carries its remedy
    else:
        cause = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, ImportError):
            package = getattr(exc, "name", None) or "the missing package"
            remedy = (
                f"install {package} into this environment, or run {label} in its own: "
                f"`python -m omnistory_core env create {label}`"
            )
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
