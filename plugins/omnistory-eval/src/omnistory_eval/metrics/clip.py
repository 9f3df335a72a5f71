"""CLIP image-image cosine similarity (paper App. E.1, Eq. 2).

Implementation: Hugging Face transformers' ``CLIPModel`` + ``CLIPProcessor`` loaded from
``openai/clip-vit-base-patch32`` (the paper's checkpoint and its own preprocessing config: resize
shortest edge to 224, center crop 224, OpenAI mean/std).  Both images are converted to RGB, encoded
with ``get_image_features`` (the projected image embedding), L2-normalized, and compared by dot
product.  transformers 4.x returns a tensor from ``get_image_features``; 5.x returns an output
object whose ``pooler_output`` is that embedding; both are accepted.

Reference images are shared by every system of a sweep, so embeddings are memoized by content hash
for the lifetime of a load.
"""

from __future__ import annotations

from typing import Any

from omnistory_core.components import EvalResult, Metric
from omnistory_core.params import Param
from omnistory_eval.metrics._common import (
    batched,
    load_or_skip,
    release_torch_memory,
    require_media,
    resolve_device,
)

PAPER_MODEL = "openai/clip-vit-base-patch32"


def image_features(output: Any) -> Any:
    """The projected embedding from ``get_image_features`` in transformers 4.x (tensor) or 5.x
    (``BaseModelOutputWithPooling``)."""
    import torch

    if isinstance(output, torch.Tensor):
        return output
    pooled = getattr(output, "pooler_output", None)
    if pooled is None:
        raise TypeError(
            f"get_image_features returned {type(output).__name__} without pooler_output"
        )
    return pooled


class CLIPMetric(Metric):
    """``clip``/``cosine``: cosine similarity of CLIP image embeddings, candidate vs gold image.

    Parameters: ``model`` (``openai/clip-vit-base-patch32``), ``device`` ("auto"), ``batch_size``
    (32 items, i.e. up to 64 images per forward pass), ``cache_size`` (embeddings kept, 4096).
    """

    name = "clip"
    version = "1"
    track = "image"
    criteria = ("cosine",)
    reads = ("candidate_image", "reference_image")
    default_batch_size = 32
    description = "CLIP ViT-B/32 image-image cosine similarity (transformers CLIPModel)"
    parameters = (
        Param(
            "model", str, PAPER_MODEL, "CLIP checkpoint: hub id or local directory", weights=True
        ),
        Param("device", (str, None), "auto", "auto | cpu | cuda[:N]", runtime=True),
        Param(
            "cache_size",
            int,
            4096,
            "image embeddings kept in memory (gold images are shared by every system)",
            runtime=True,
            ge=1,
        ),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._model: Any = None
        self._processor: Any = None
        self._device = "cpu"
        self._cache: dict[str, Any] = {}

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        return [params.get("model") or PAPER_MODEL]

    def preflight_needs(self) -> list[Any]:
        """Packages and checkpoint, checked by ``evaluate`` before scoring anything."""
        from omnistory_eval.preflight import METRICS_EXTRA, package_need, weights_need

        needs = [package_need(m, METRICS_EXTRA) for m in ("transformers", "torch")]
        return needs + [weights_need(c, "metric=clip") for c in self.checkpoints(self.params)]

    def load(self) -> None:
        from omnistory_core.kit.hub import load_cache_first

        load_cache_first(self.checkpoints(self.params), self._load)

    def _load(self) -> None:
        from transformers import CLIPModel, CLIPProcessor

        model_id = self.params["model"]
        self._device = resolve_device(self.params.get("device"))
        self._processor = load_or_skip(model_id, lambda: CLIPProcessor.from_pretrained(model_id))
        model = load_or_skip(model_id, lambda: CLIPModel.from_pretrained(model_id))
        # transformers declares PreTrainedModel.to as functools.wraps(torch.nn.Module.to), which
        # pyright reads as the unbound function (self = the device)
        self._model = model.eval().to(self._device)  # pyright: ignore[reportArgumentType]
        self._cache = {}

    def unload(self) -> None:
        self._model = self._processor = None
        self._cache = {}
        release_torch_memory()

    def embed(self, images: list[Any]) -> Any:
        """L2-normalized CLIP embeddings (float32, CPU) of PIL images, one row per image."""
        import torch

        pixels = self._processor(images=images, return_tensors="pt")["pixel_values"]
        with torch.no_grad():
            out = self._model.get_image_features(pixel_values=pixels.to(self._device))
        feats = image_features(out).float().cpu()
        return feats / feats.norm(dim=-1, keepdim=True)

    def _embeddings(self, media: list[Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """Embeddings by sha256 for every openable image; errors by sha256 for the others."""
        errors: dict[str, str] = {}
        todo: dict[str, Any] = {}
        for m in media:
            if m.sha256 in self._cache or m.sha256 in todo or m.sha256 in errors:
                continue
            try:
                todo[m.sha256] = m.open_image()  # RGB (Media.open_image converts)
            except Exception as exc:  # unreadable or not an image: only this item is invalid
                errors[m.sha256] = f"{m.path}: cannot open image: {type(exc).__name__}: {exc}"
        keys = list(todo)
        for chunk in batched(keys, 2 * self.batch_size):
            feats = self.embed([todo[k] for k in chunk])
            for k, row in zip(chunk, feats, strict=True):
                self._cache[k] = row
        found = {m.sha256: self._cache[m.sha256] for m in media if m.sha256 in self._cache}
        limit = int(self.params.get("cache_size") or 4096)
        while len(self._cache) > limit:  # drop oldest entries (dicts keep insertion order)
            self._cache.pop(next(iter(self._cache)))
        return found, errors

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        pairs = [
            (require_media(i, "candidate_image"), require_media(i, "reference_image"))
            for i in items
        ]
        media = [m for pair in pairs for m in pair]
        emb: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for chunk in batched(media, 2 * self.batch_size):
            found, errs = self._embeddings(list(chunk))
            emb.update(found)
            errors.update(errs)
        results = []
        for cand, ref in pairs:
            bad = [errors[m.sha256] for m in (cand, ref) if m.sha256 in errors]
            if bad:
                results.append(
                    EvalResult(
                        scores={"cosine": None}, status="invalid", detail={"error": "; ".join(bad)}
                    )
                )
                continue
            cosine = float((emb[cand.sha256] * emb[ref.sha256]).sum())
            results.append(EvalResult(scores={"cosine": cosine}))
        return results
