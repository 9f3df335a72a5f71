"""Helpers both implementations share once torch is loaded: dtype keyword, seeding, sampling
settings, load-error hints."""

from __future__ import annotations

from typing import Any


def dtype_kwargs(dtype: Any) -> dict[str, Any]:
    """``from_pretrained`` takes ``dtype`` since transformers 4.56 and ``torch_dtype`` before (the
    official remote-code environment pins 4.44.0)."""
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__).release >= (4, 56):
        return {"dtype": dtype}
    return {"torch_dtype": dtype}


def seed_everything(seed: int) -> None:
    """Seed torch's CPU and CUDA generators before one sampled generation."""
    import torch

    torch.manual_seed(seed)


def sampling(do_sample: bool, temperature: float, top_p: float, top_k: int) -> dict[str, Any]:
    """Sampling settings for a GenerationConfig; greedy decoding gets transformers' defaults
    (unused, but never the checkpoint's)."""
    if not do_sample:
        return {"do_sample": False, "temperature": 1.0, "top_p": 1.0, "top_k": 50}
    return {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": top_k}


def describe_load_error(exc: BaseException) -> str:
    """The exception with a hint for the usual reasons a checkpoint does not load."""
    text = f"{type(exc).__name__}: {exc}"
    names = {cls.__name__ for cls in type(exc).__mro__}
    lowered = text.lower()
    if "GatedRepoError" in names or "401" in lowered:
        return text + " -- accept the licence on the hub and provide HF_TOKEN"
    if "LocalEntryNotFoundError" in names or "offline" in lowered:
        return text + " -- not in the local cache and the hub cannot be reached (HF_HUB_OFFLINE?)"
    if "RepositoryNotFoundError" in names or "is not a local folder" in lowered:
        return text + " -- no such hub id or local directory"
    return text
