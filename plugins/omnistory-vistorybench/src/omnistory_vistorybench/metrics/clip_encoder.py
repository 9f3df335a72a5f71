"""The parts CIDS is built from: a detector, encoders, and the CLIP encoder.

The official CIDS evaluator (``bench/content/cids_evaluator.py``) detects characters with
GroundingDINO (prompt ``"character"``), embeds each crop with an encoder chosen by the
character's tag -- ``realistic_human``: a face ensemble (ArcFace + AdaFace + FaceNet, or ArcFace
alone), every other tag: CLIP ``openai/clip-vit-large-patch14`` -- and compares embeddings.
GroundingDINO needs transformers 4.x and the face models their own stacks, so they plug in
behind two protocols:

* :class:`Detector`: ``detect(image, prompt) -> Detection`` (normalised ``cx, cy, w, h`` boxes
  and their logits, already thresholded);
* :class:`Encoder`: ``encode(images) -> Encoded`` (features for the images it could embed, with
  their indices: a face encoder finds no face in some crops) and ``similarity(a, b)`` (the
  matrix between two feature lists, the encoder's own notion: cosine for CLIP, the
  per-model-averaged cosine for the face ensemble).

:class:`CLIPImageEncoder` is the CLIP path: transformers ``CLIPModel`` + ``CLIPImageProcessor``
from a hub id or a local directory (the official reads ``data/pretrain/openai/
clip-vit-large-patch14``), ``get_image_features`` L2-normalised, similarity ``a @ b.T``.
No heavy import at module level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from omnistory_vistorybench.metrics._common import batched, load_pretrained, release_torch_memory

# numpy is imported where it is used: registering the metrics (in every process that discovers
# the plugins) stays without it
if TYPE_CHECKING:
    import numpy as np

OFFICIAL_CLIP = "openai/clip-vit-large-patch14"


@dataclass(frozen=True)
class Detection:
    """What a detector found on one image: ``boxes`` as normalised ``(cx, cy, w, h)`` rows and
    one ``logits`` value (confidence) per box."""

    boxes: Sequence[Sequence[float]] = ()
    logits: Sequence[float] = ()

    def __post_init__(self) -> None:
        if len(self.boxes) != len(self.logits):
            raise ValueError(f"{len(self.boxes)} boxes but {len(self.logits)} logits")

    def __len__(self) -> int:
        return len(self.logits)

    def order(self) -> list[int]:
        """Box indices by decreasing logit (ties in detector order)."""
        return sorted(range(len(self.logits)), key=lambda i: -float(self.logits[i]))


@dataclass
class Encoded:
    """Features of the images an encoder could embed: ``features[j]`` is of ``images[
    indices[j]]``."""

    indices: list[int] = field(default_factory=list)
    features: list[Any] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.features)


@runtime_checkable
class Detector(Protocol):
    """Finds the characters of an image for a text prompt."""

    def detect(self, image: Any, prompt: str) -> Detection: ...


@runtime_checkable
class Encoder(Protocol):
    """Embeds character crops and compares embeddings."""

    def encode(self, images: Sequence[Any]) -> Encoded: ...

    def similarity(self, a: Sequence[Any], b: Sequence[Any]) -> np.ndarray: ...


class CLIPImageEncoder:
    """CLIP image embeddings: ``load(model)``, ``encode(images)``, ``similarity(a, b)``."""

    def __init__(self, *, device: str = "cpu", batch_size: int = 16):
        self.device = device
        self.batch_size = batch_size
        self.model: Any = None
        self.processor: Any = None

    def load(self, model: str = OFFICIAL_CLIP) -> CLIPImageEncoder:
        from transformers import CLIPImageProcessor, CLIPModel

        self.processor = load_pretrained(model, lambda: CLIPImageProcessor.from_pretrained(model))
        clip = load_pretrained(model, lambda: CLIPModel.from_pretrained(model))
        # transformers declares PreTrainedModel.to as functools.wraps(torch.nn.Module.to)
        self.model = clip.eval().to(self.device)  # pyright: ignore[reportArgumentType]
        return self

    def unload(self) -> None:
        self.model = self.processor = None
        release_torch_memory()

    def embed(self, images: Sequence[Any]) -> np.ndarray:
        """(n, projection_dim) float32 rows, L2-normalised, for RGB PIL images."""
        import numpy as np
        import torch

        if self.model is None:
            raise RuntimeError("CLIPImageEncoder.embed before load()")
        rows = []
        for chunk in batched(list(images), self.batch_size):
            rgb = [im if im.mode == "RGB" else im.convert("RGB") for im in chunk]
            pixels = self.processor(images=rgb, return_tensors="pt")["pixel_values"]
            with torch.no_grad():
                out = self.model.get_image_features(pixel_values=pixels.to(self.device))
            feats = image_features(out).float()
            rows.append(torch.nn.functional.normalize(feats, p=2, dim=1).cpu().numpy())
        return np.concatenate(rows, axis=0) if rows else np.zeros((0, 0), np.float32)

    def encode(self, images: Sequence[Any]) -> Encoded:
        if not images:
            return Encoded()
        rows = self.embed(images)
        return Encoded(list(range(len(images))), [row for row in rows])

    def similarity(self, a: Sequence[Any], b: Sequence[Any]) -> np.ndarray:
        import numpy as np

        return np.stack(list(a)) @ np.stack(list(b)).T


def image_features(output: Any) -> Any:
    """The projected embedding of ``get_image_features``: a tensor in transformers 4.x, an
    output object whose ``pooler_output`` it is in 5.x."""
    import torch

    if isinstance(output, torch.Tensor):
        return output
    pooled = getattr(output, "pooler_output", None)
    if pooled is None:
        raise TypeError(f"get_image_features returned {type(output).__name__}")
    return pooled


__all__ = [
    "CLIPImageEncoder",
    "Detection",
    "Detector",
    "Encoded",
    "Encoder",
    "OFFICIAL_CLIP",
    "image_features",
]
