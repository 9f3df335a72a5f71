"""Helpers shared by the metric components (no heavy imports at module level)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from omnistory_core.components import ComponentError

T = TypeVar("T")

PREFETCH_HINT = "run the prefetch command"


def resolve_device(device: str | None) -> str:
    """``auto``/None -> ``cuda`` when available, else ``cpu``; anything else is passed through."""
    if device in (None, "", "auto"):
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(device)


def model_unavailable(model: str, exc: BaseException) -> ComponentError:
    """The error a metric raises from ``load()`` when a checkpoint cannot be loaded (typically
    offline without a prefetched copy); the message starts with ``skipped:`` so reports can show
    it instead of a number."""
    from pathlib import Path

    if Path(model).is_dir():  # a local checkpoint: fetching would not help
        return ComponentError(
            f"skipped: {model} cannot be loaded from that directory ({type(exc).__name__}: {exc})",
            category="model_error",
        )
    return ComponentError(
        f"skipped: {model} not available offline; {PREFETCH_HINT} ({type(exc).__name__}: {exc})",
        category="model_error",
    )


def is_missing_checkpoint(exc: BaseException) -> bool:
    """OSError (how transformers reports a checkpoint it cannot find or fetch) or any
    huggingface_hub error (offline, not found, gated, or a path that is not a repo id)."""
    from omnistory_core.kit.hub import is_missing_checkpoint as missing

    return missing(exc)


def load_or_skip(model: str, loader: Callable[[], T]) -> T:
    """Call ``loader`` with the local cache first and the hub tried once (see
    :mod:`omnistory_core.kit.hub`); turn missing-checkpoint errors into
    :func:`model_unavailable`."""
    from omnistory_core.kit.hub import load_cache_first

    try:
        return load_cache_first([model], loader)
    except Exception as exc:
        if is_missing_checkpoint(exc):
            raise model_unavailable(model, exc) from exc
        raise


def batched(seq: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    size = max(1, int(size))
    for start in range(0, len(seq), size):
        yield seq[start : start + size]


def require_media(item: dict[str, Any], name: str) -> Any:
    """The ``Media`` input ``name`` of an item, with an error naming the field if it is absent."""
    media = item.get(name)
    if media is None or not getattr(media, "path", None):
        raise ValueError(f"evaluation item has no {name!r} (expected a Media with a path)")
    return media


def require_text(item: dict[str, Any], name: str) -> str:
    value = item.get(name)
    if not isinstance(value, str):
        raise ValueError(
            f"evaluation item field {name!r} must be a string, got {type(value).__name__}"
        )
    return value


def release_torch_memory() -> None:
    """Free cached accelerator memory after a model is dropped (no-op without CUDA)."""
    import gc

    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:  # pragma: no cover - torch is present wherever a model was loaded
        pass
