"""What the ViStoryBench metrics share: devices, checkpoint loading, and reading their inputs.

The input shapes (the runner wiring comes later; each metric class documents what it reads):

* ``shot``: one story shot as a dict.  Its index is ``index``; its onstage characters are
  ``character_key`` (the official loader's name), ``characters`` or story.json's
  ``"Characters Appearing"`` (``{"en": [...]}``); its texts use the loader's names (``scene``,
  ``script``, ``camera``) or story.json's (``"Setting Description"``, ``"Static Shot
  Description"``, ``"Shot Perspective Design"``), each a string or ``{"en": ..., "ch": ...}``;
* ``candidate_shots``: ``{shot index: Media or None}``, in story order;
* ``story_images``: every image of the story's output folder (a list of Media);
* ``characters``: ``{key: {"name": str, "tag": str, "refs": [Media, ...]}}`` in story order.

No heavy import at module level.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from omnistory_core.api import ComponentError

T = TypeVar("T")

#: story.json's name of each loader field that a metric reads
STORY_JSON_FIELDS: dict[str, str] = {
    "scene": "Setting Description",
    "script": "Static Shot Description",
    "camera": "Shot Perspective Design",
    "plot": "Plot Correspondence",
}
#: the shot field marking a story whose output folder has images but none at a story.json
#: index: its shots reach the item metrics without an image (``candidate_image`` None), which
#: score them 0 as the official story mean does (``faithful``), and its group unit is scored
UNINDEXED = "story_images_unindexed"


# -- devices and memory -------------------------------------------------------------------------
def resolve_device(device: str | None) -> str:
    """``auto``/None -> ``cuda`` when available, else ``cpu``; anything else as given."""
    if device in (None, "", "auto"):
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(device)


def resolve_dtype(dtype: str | None, device: str) -> Any:
    """``auto`` -> float16 on CUDA (what the official evaluators run), float32 elsewhere."""
    import torch

    name = dtype or "auto"
    if name == "auto":
        name = "float16" if device.startswith("cuda") else "float32"
    return {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[name]


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


def batched(seq: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    size = max(1, int(size))
    for start in range(0, len(seq), size):
        yield seq[start : start + size]


# -- checkpoints --------------------------------------------------------------------------------
def require_file(path: str | None, what: str, hint: str) -> Path:
    """An existing weights file, or a ``skipped:`` ComponentError naming what to set."""
    if not path:
        raise ComponentError(f"skipped: {what} needs a weights file; {hint}", "model_error")
    file = Path(os.path.expanduser(str(path)))
    if not file.is_file():
        raise ComponentError(f"skipped: {what}: {file} not found; {hint}", "model_error")
    return file


def file_need(path: str | None, setting: str, what: str) -> list[dict[str, str]]:
    """The pre-flight's need for a weights file (``evaluate`` checks it before scoring
    anything): a ``config`` problem when ``setting`` is unset or names no file.  A plain
    mapping with the fields of the evaluation's ``Need``, which a plugin cannot import."""
    remedy = f"--set {setting}=PATH ({what})"
    if not path:
        return [{"check": "config", "target": setting, "remedy": remedy, "detail": "not set"}]
    file = Path(os.path.expanduser(str(path)))
    if not file.is_file():
        detail = f"{file} not found"
        return [{"check": "config", "target": setting, "remedy": remedy, "detail": detail}]
    return []


def checkpoint_need(checkpoint: str, selection: str, setting: str) -> list[dict[str, str]]:
    """A ``from_pretrained`` checkpoint (hub id or local directory) the pre-flight looks for."""
    remedy = (
        f"run `python -m omnistory_core prefetch {selection}` where the hub is reachable (same"
        f" HF_HOME), or --set {setting}=DIR (a local copy)"
    )
    return [{"check": "weights", "target": str(checkpoint), "remedy": remedy}]


def load_pretrained(model: str, loader: Callable[[], T]) -> T:
    """``loader()`` for a ``from_pretrained`` checkpoint: a local directory directly, a hub id
    with the cache first (:func:`omnistory_core.kit.hub.load_cache_first`).  A checkpoint that
    cannot be found becomes a ``skipped:`` ComponentError."""
    from omnistory_core.kit.hub import is_missing_checkpoint, load_cache_first

    local = Path(os.path.expanduser(model)).is_dir()
    try:
        return loader() if local else load_cache_first([model], loader)
    except Exception as exc:
        if is_missing_checkpoint(exc):
            where = "that directory" if local else "offline; run the prefetch command"
            raise ComponentError(
                f"skipped: {model} cannot be loaded from {where} ({type(exc).__name__}: {exc})",
                "model_error",
            ) from exc
        raise


def torch_load(path: Path) -> Any:
    """A state dict from a ``.pth`` file, on the CPU (tensors only: no pickled code runs)."""
    import torch

    return torch.load(str(path), map_location="cpu", weights_only=True)


# -- media --------------------------------------------------------------------------------------
def media_path(media: Any) -> str | None:
    """The path of a Media (or a plain path), None for None."""
    if media is None:
        return None
    path = getattr(media, "path", media)
    return str(path) if path else None


def media_exists(media: Any) -> bool:
    path = media_path(media)
    return bool(path) and os.path.isfile(str(path))


def open_rgb(media: Any) -> Any:
    """A PIL RGB image from a Media or a path (``Media.open_image`` when it has one)."""
    opener = getattr(media, "open_image", None)
    if callable(opener):
        return opener()
    from PIL import Image

    with Image.open(str(media)) as img:
        return img.convert("RGB")


def open_all(media: Sequence[Any]) -> tuple[list[Any], list[str]]:
    """The openable images of ``media`` (in order) and an error line for each other one."""
    images, errors = [], []
    for m in media:
        try:
            images.append(open_rgb(m))
        except Exception as exc:  # an unreadable file: reported, never scored as a 0
            errors.append(f"{media_path(m)}: cannot open image: {type(exc).__name__}: {exc}")
    return images, errors


# -- story inputs -------------------------------------------------------------------------------
def shot_index(shot: Mapping[str, Any]) -> int:
    return int(shot["index"])


def shot_character_keys(shot: Mapping[str, Any]) -> list[str]:
    """The onstage character keys of a shot (see the module docstring for the spellings)."""
    for name in ("character_key", "characters"):
        keys = shot.get(name)
        if keys is not None:
            return [str(k) for k in keys]
    appearing = shot.get("Characters Appearing")
    if isinstance(appearing, Mapping):
        return [str(k) for k in appearing.get("en") or []]
    if isinstance(appearing, list):
        return [str(k) for k in appearing]
    return []


def shot_text(shot: Mapping[str, Any], field: str, language: str = "en") -> str | None:
    """A shot's text field by its loader name (``scene``, ``script``, ``camera``) or story.json
    name; a ``{"en", "ch"}`` value gives ``language`` (English when that is absent)."""
    value = shot.get(field)
    if value is None:
        value = shot.get(STORY_JSON_FIELDS.get(field, field))
    if isinstance(value, Mapping):
        value = value.get(language, value.get("en"))
    return None if value is None else str(value)


def candidate_shots(item: Mapping[str, Any]) -> dict[int, Any]:
    shots = item.get("candidate_shots") or {}
    return {int(k): v for k, v in shots.items()}


def story_images(item: Mapping[str, Any]) -> list[Any]:
    return list(item.get("story_images") or [])


def story_characters(item: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return dict(item.get("characters") or {})


def story_shots(item: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(item.get("shots") or [])


def shot_images(item: Mapping[str, Any]) -> list[Any]:
    """The listed output images of the story's shots, in story order (None entries left out)."""
    return [m for m in candidate_shots(item).values() if m is not None]


__all__ = [
    "STORY_JSON_FIELDS",
    "batched",
    "candidate_shots",
    "checkpoint_need",
    "file_need",
    "load_pretrained",
    "media_exists",
    "media_path",
    "open_all",
    "open_rgb",
    "release_torch_memory",
    "require_file",
    "resolve_device",
    "resolve_dtype",
    "shot_character_keys",
    "shot_images",
    "shot_index",
    "shot_text",
    "story_characters",
    "story_images",
    "story_shots",
    "torch_load",
]
