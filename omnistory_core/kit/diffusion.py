"""What the diffusers image experts share: settings, per-item seeds, devices, batched calls.

Everything here is importable without torch; torch is imported inside the functions that need it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from omnistory_core.contract import Failure

T = TypeVar("T")

#: accepted spellings of the ``dtype`` parameter -> torch attribute name
DTYPE_NAMES: dict[str, str] = {
    "auto": "auto",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}

#: parameters every component receives besides its own (the engine always passes ``seed``)
ENGINE_PARAMS = ("seed", "batch_size")


class SettingsError(ValueError):
    """A parameter of an image expert that cannot work; the message names the parameter."""


@dataclass(frozen=True)
class DiffusionSettings:
    """The validated parameters shared by the diffusers experts."""

    model: str
    revision: str | None
    steps: int
    guidance_scale: float
    height: int
    width: int
    dtype: str
    device: str
    seed: int


def check_params(owner: str, params: Mapping[str, Any], known: Iterable[str]) -> None:
    """Reject parameters the expert does not understand (a typo would otherwise be ignored
    silently while still splitting the cache)."""
    allowed = set(known) | set(ENGINE_PARAMS)
    unknown = sorted(k for k in params if k not in allowed)
    if unknown:
        raise SettingsError(
            f"{owner}: unknown parameter(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(allowed))}"
        )


def setting(params: Mapping[str, Any], defaults: Mapping[str, Any], key: str) -> Any:
    """The configured value, or the expert's default where the config leaves it out or null."""
    value = params.get(key)
    return defaults.get(key) if value is None else value


def positive_int(
    owner: str, key: str, value: Any, *, multiple_of: int = 1, maximum: int | None = None
) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SettingsError(f"{owner}: {key} must be a positive integer, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise SettingsError(f"{owner}: {key} must be a positive integer, got {value!r}") from None
    if number < 1 or number % multiple_of:
        extra = f" and a multiple of {multiple_of}" if multiple_of > 1 else ""
        raise SettingsError(f"{owner}: {key} must be a positive integer{extra}, got {value!r}")
    if maximum is not None and number > maximum:
        raise SettingsError(f"{owner}: {key} must be at most {maximum}, got {value!r}")
    return number


def non_negative_float(owner: str, key: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SettingsError(f"{owner}: {key} must be a number, got {value!r}") from None
    if isinstance(value, bool) or number < 0 or number != number:
        raise SettingsError(f"{owner}: {key} must be a non-negative number, got {value!r}")
    return number


def boolean(owner: str, key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise SettingsError(f"{owner}: {key} must be true or false, got {value!r}")


def parse_settings(
    owner: str, params: Mapping[str, Any], defaults: Mapping[str, Any], *, size_multiple: int
) -> DiffusionSettings:
    """Validate the common parameters; ``size_multiple`` is the model's pixel granularity."""
    model = setting(params, defaults, "model")
    if not isinstance(model, str) or not model.strip():
        raise SettingsError(
            f"{owner}: model must be a checkpoint id or a local path, got {model!r}"
        )
    revision = params.get("revision")
    if revision is not None and not isinstance(revision, str):
        raise SettingsError(f"{owner}: revision must be a string, got {revision!r}")
    dtype = str(setting(params, defaults, "dtype")).lower()
    if dtype not in DTYPE_NAMES:
        raise SettingsError(
            f"{owner}: dtype must be one of {', '.join(DTYPE_NAMES)}, got {dtype!r}"
        )
    device = str(setting(params, defaults, "device")).strip()
    if not device:
        raise SettingsError(f"{owner}: device must be 'auto' or a torch device such as 'cuda:0'")
    seed = params.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SettingsError(f"{owner}: seed must be an integer, got {seed!r}")
    return DiffusionSettings(
        model=model,
        revision=revision,
        steps=positive_int(owner, "steps", setting(params, defaults, "steps")),
        guidance_scale=non_negative_float(
            owner, "guidance_scale", setting(params, defaults, "guidance_scale")
        ),
        height=positive_int(
            owner, "height", setting(params, defaults, "height"), multiple_of=size_multiple
        ),
        width=positive_int(
            owner, "width", setting(params, defaults, "width"), multiple_of=size_multiple
        ),
        dtype=DTYPE_NAMES[dtype],
        device=device,
        seed=seed,
    )


def item_seed(seed: int, *content: str) -> int:
    """The generator seed of one item: a function of the run's ``seed`` and the item's content only,
    so an image never depends on which other items shared its batch, or on their order."""
    payload = json.dumps([int(seed), *content], ensure_ascii=True)  # escapes lone surrogates too
    digest = hashlib.sha256(payload.encode("ascii")).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


#: how an item's generator seed is chosen (``seed_mode``)
SEED_MODES = ("per_prompt", "fixed")


def parse_seed_mode(owner: str, value: Any) -> str:
    """``per_prompt`` (the default; also for null) or ``fixed``."""
    mode = "per_prompt" if value is None else value
    if mode not in SEED_MODES:
        raise SettingsError(
            f"{owner}: seed_mode must be one of {', '.join(SEED_MODES)}, got {value!r}"
        )
    return mode


def generator_seed(mode: str, seed: int, *content: str) -> int:
    """The seed of one item's generator.

    ``per_prompt``: :func:`item_seed` of the run's ``seed`` and the item's content, so two prompts
    start from different noise.  ``fixed``: ``seed`` itself for every item, as a runner that seeds
    a fresh generator with the same number before each image does; two prompts then start from the
    same noise.  Either way each item has its own generator, so an image never depends on its
    batch-mates.
    """
    if mode == "fixed":
        return int(seed)
    if mode == "per_prompt":
        return item_seed(seed, *content)
    raise ValueError(f"unknown seed_mode {mode!r}")


def key_without_defaults(
    params: dict[str, Any], values: Mapping[str, Any], defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """``params`` (a cache-key dict) with each key of ``values`` present only where its parsed
    value differs from ``defaults``.  For parameters added after caches were written: at their
    default, the cache key of an expert stays what it was before the parameter existed."""
    out = {k: v for k, v in params.items() if k not in values}
    for key, value in values.items():
        if value != defaults[key]:
            out[key] = value
    return dict(sorted(out.items()))


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a CUDA device is visible, else ``cpu``."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SettingsError(f"device={device!r} was requested but no CUDA device is visible")
    return device


def resolve_dtype(dtype: str, device: str):  # -> torch.dtype
    """``auto`` -> bfloat16 on a GPU, float32 on the CPU (bf16 matmuls are slow on most CPUs)."""
    import torch

    name = DTYPE_NAMES[dtype]
    if name == "auto":
        name = "float32" if device == "cpu" else "bfloat16"
    return getattr(torch, name)


def chunked(seq: Sequence[T], size: int) -> list[list[T]]:
    size = max(1, int(size))
    return [list(seq[i : i + size]) for i in range(0, len(seq), size)]


def call_with_fallback(
    call: Callable[[list[T]], list[Any]],
    group: list[T],
    on_error: Callable[[BaseException], None] | None = None,
) -> list[Any]:
    """Run ``call`` on the whole group; if it raises, run it item by item so that one bad item
    becomes that item's failure and its batch-mates still get their images."""
    try:
        outputs = call(group)
        if len(outputs) != len(group):
            raise RuntimeError(f"pipeline returned {len(outputs)} images for {len(group)} prompts")
        return list(outputs)
    except Exception as exc:
        if on_error is not None:
            on_error(exc)
        if len(group) == 1:
            return [exception_failure(exc)]
    results: list[Any] = []
    for job in group:
        try:
            results.extend(call([job])[:1])
        except Exception as exc:
            if on_error is not None:
                on_error(exc)
            results.append(exception_failure(exc))
    return results


def exception_failure(exc: BaseException) -> Failure:
    """Categorise an exception raised while generating one item."""
    if isinstance(exc, TimeoutError):
        return Failure("timeout", f"{type(exc).__name__}: {exc}")
    category = getattr(exc, "category", None)
    if isinstance(category, str):  # ComponentError
        return Failure(category, str(exc))
    return Failure("model_error", f"{type(exc).__name__}: {exc}")


def arrays_to_images(images: Any) -> list[Any]:
    """Float images in [0, 1] (N, H, W, 3) -> PIL images; a non-finite image is an empty output
    (bf16 overflow decodes to NaN, which would otherwise be saved as a black picture)."""
    import numpy as np
    from PIL import Image

    results: list[Any] = []
    for array in np.asarray(images):
        if array.size == 0:
            results.append(Failure("empty_output", "the pipeline returned an empty image"))
        elif not np.isfinite(array).all():
            results.append(Failure("empty_output", "non-finite pixel values in the decoded image"))
        else:
            pixels = (np.clip(array, 0.0, 1.0) * 255.0).round().astype(np.uint8)
            results.append(Image.fromarray(pixels))
    return results


def release_cuda_memory() -> None:
    """Return cached CUDA blocks after a failure or an unload (a no-op without CUDA)."""
    import gc

    gc.collect()
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a requirement
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


__all__ = [
    "DTYPE_NAMES",
    "ENGINE_PARAMS",
    "SEED_MODES",
    "DiffusionSettings",
    "SettingsError",
    "arrays_to_images",
    "boolean",
    "call_with_fallback",
    "check_params",
    "chunked",
    "exception_failure",
    "generator_seed",
    "item_seed",
    "key_without_defaults",
    "non_negative_float",
    "parse_seed_mode",
    "parse_settings",
    "positive_int",
    "release_cuda_memory",
    "resolve_device",
    "resolve_dtype",
    "setting",
]
