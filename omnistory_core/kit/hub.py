"""Hugging Face hub access that answers in seconds on an offline machine.

Loading a checkpoint through transformers or huggingface_hub asks the hub about every file and
retries each failed request with growing waits: offline, one metric takes minutes to learn that
its weights are missing.  Here the local cache is looked at first:

* ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set: only the cache is used, as the libraries do;
* every checkpoint already in the cache: loaded in offline mode, without any request;
* otherwise the hub is tried once, with a short timeout (``HF_HUB_ETAG_TIMEOUT`` if set, else
  :data:`PROBE_TIMEOUT_S`); unreachable, the load runs in offline mode and fails at once on the
  first missing file.

Nothing here imports huggingface_hub at module level.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

PROBE_TIMEOUT_S = 5.0
_TRUE = {"1", "on", "yes", "true"}
_probe_result: dict[str, tuple[bool, str]] = {}


_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def offline_variable() -> str | None:
    """The variable that asks for the cache only (set by the user or :func:`offline_mode`)."""
    for var in _OFFLINE_VARS:
        if (os.environ.get(var) or "").strip().lower() in _TRUE:
            return var
    return None


def offline_requested() -> bool:
    """Whether the user (or an enclosing :func:`offline_mode`) asked for the cache only."""
    return offline_variable() is not None


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def probe_timeout() -> float:
    try:
        return float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or PROBE_TIMEOUT_S)
    except ValueError:
        return PROBE_TIMEOUT_S


def hub_reachable() -> tuple[bool, str]:
    """(reachable, why not): one request per process and endpoint, never retried."""
    var = offline_variable()
    if var is not None:
        return False, f"{var} is set"
    url = endpoint()
    if url not in _probe_result:
        _probe_result[url] = _probe(url, probe_timeout())
    return _probe_result[url]


def _probe(url: str, timeout: float) -> tuple[bool, str]:
    # here, not at the top: plugins import this module when they register, and urllib.request
    # (http.client, email, ssl) costs every CLI process some 30 ms of CPU
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{url}/api/models?limit=1", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return True, ""
    except urllib.error.HTTPError as exc:
        # 407 and 5xx come from a proxy or gateway standing in for a hub it could not reach
        if exc.code == 407 or exc.code >= 500:
            return False, f"{url} unreachable (HTTP {exc.code} {exc.reason})"
        return True, ""  # the hub answered: reachable, whatever it thinks of the request
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"{url} unreachable ({type(reason).__name__}: {reason})"


def cached_snapshot(repo_id: str) -> str | None:
    """The local directory of ``repo_id``: itself when it is a path, else its snapshot in the
    Hugging Face cache (no request is made); None when absent."""
    if not repo_id:
        return None
    if Path(repo_id).exists():
        return repo_id
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        return str(snapshot_download(repo_id, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached, or not a repo id: either way not local
        return None


@dataclass(frozen=True)
class CheckpointState:
    """Where a checkpoint would come from; ``problem`` is None when it can be loaded."""

    checkpoint: str
    source: str  # "local" | "cache" | "hub" | "unavailable"
    problem: str | None = None


def checkpoint_state(repo_id: str) -> CheckpointState:
    """Present locally, downloadable, or why neither (at most the one probe of the hub)."""
    if cached_snapshot(repo_id) is not None:
        source = "local" if Path(repo_id).exists() else "cache"
        return CheckpointState(repo_id, source)
    var = offline_variable()
    if var is not None:
        return CheckpointState(repo_id, "unavailable", f"not in the local cache and {var} is set")
    reachable, why = hub_reachable()
    if not reachable:
        return CheckpointState(repo_id, "unavailable", f"not in the local cache and {why}")
    return CheckpointState(repo_id, "hub")


@contextmanager
def offline_mode() -> Iterator[None]:
    """Cache only, for this process's libraries and for the workers it starts meanwhile."""
    saved = {v: os.environ.get(v) for v in ("HF_HUB_OFFLINE",)}
    constants = None
    try:
        from huggingface_hub import constants
    except ImportError:
        pass
    previous = getattr(constants, "HF_HUB_OFFLINE", None)
    os.environ["HF_HUB_OFFLINE"] = "1"
    if constants is not None:
        # huggingface_hub reads the variable once, at import; transformers asks it at call time
        constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        if constants is not None:
            constants.HF_HUB_OFFLINE = previous


def is_missing_checkpoint(exc: BaseException) -> bool:
    """An error (or one it was raised from) saying a checkpoint could not be found or fetched:
    OSError (transformers) or any huggingface_hub error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) or type(current).__module__.startswith("huggingface_hub"):
            return True
        current = current.__cause__
    return False


def load_cache_first(checkpoints: Iterable[str], loader: Callable[[], T]) -> T:
    """Run ``loader`` (which reads ``checkpoints``) with the cache first, the hub tried once."""
    if offline_requested():
        return loader()
    ids = [c for c in checkpoints if c]
    if all(cached_snapshot(c) is not None for c in ids):
        try:
            with offline_mode():
                return loader()
        except Exception as exc:
            if not is_missing_checkpoint(exc):
                raise
            # a partial snapshot (files another component never needed): fetch what is missing
            if not hub_reachable()[0]:
                raise
    if not hub_reachable()[0]:
        with offline_mode():
            return loader()
    return loader()


def load_checkpoints(cls: type, params: Mapping[str, Any]) -> list[str]:
    """Hub ids a component's ``load()`` reads: its own ``checkpoints(params)`` if it has one, else
    its ``model`` / ``text_encoder`` parameters (and a judge's ``spec.checkpoint`` when no
    ``model`` is set).  Local directories are left out: they need nothing fetched."""
    if hasattr(cls, "checkpoints"):
        ids = list(cls.checkpoints(params))
    else:
        ids = [str(params[k]) for k in ("model", "text_encoder") if params.get(k)]
        spec = getattr(cls, "spec", None)
        if spec is not None and getattr(spec, "checkpoint", None) and not params.get("model"):
            ids.append(spec.checkpoint)
    out: list[str] = []
    for checkpoint in ids:
        if checkpoint and checkpoint not in out and not Path(checkpoint).exists():
            out.append(checkpoint)
    return out


def load_component(component: object) -> None:
    """``component.load()`` with the cache first and the hub tried once, for any component whose
    checkpoints :func:`load_checkpoints` can name (its ``checkpoints(params)``, or its ``model`` /
    ``text_encoder`` parameters)."""
    inner = getattr(component, "_component", component)  # an isolated one: the real class
    params = dict(getattr(inner, "params", {}) or {})
    try:
        ids = load_checkpoints(type(inner), params)
    except Exception:  # noqa: BLE001 - naming checkpoints is best effort; loading decides
        ids = []
    load_cache_first(ids, component.load)  # type: ignore[attr-defined]


__all__ = [
    "PROBE_TIMEOUT_S",
    "CheckpointState",
    "cached_snapshot",
    "checkpoint_state",
    "endpoint",
    "hub_reachable",
    "is_missing_checkpoint",
    "load_cache_first",
    "load_checkpoints",
    "load_component",
    "offline_mode",
    "offline_requested",
    "offline_variable",
    "probe_timeout",
]
