"""Aesthetic quality (``aesthetic_score``): aesthetic-predictor-v2.5 and the story metric.

The predictor, as the official evaluator (``bench/quality/aesthetic_evaluator.py`` with its
vendored ``aesthetic-predictor-v2-5``) runs it: a SigLIP vision tower
(``google/siglip-so400m-patch14-384`` loaded as transformers' ``SiglipVisionModel``), its
``pooler_output`` L2-normalised, then an MLP ``hidden -> 1024 -> 128 -> 64 -> 16 -> 1`` (dropout
between the layers, inactive in eval) whose weights come from ``aesthetic_predictor_v2_5.pth``
(keys ``scoring_head.{0,2,4,6,8}.{weight,bias}``, loaded strictly).  The head's input size is
the tower's ``hidden_size`` (1152 for so400m), so a tiny SigLIP config gives a tiny head.

Input: RGB, ``Resize((378, 378))`` (PIL bilinear, what torchvision's PIL resize does) and
``ToTensor()`` -- nothing else: the official loads the SigLIP processor but never applies it, so
the pixels reach the tower in [0, 1] rather than [-1, 1].  ``faithful=false`` applies the
processor's mean/std as well.  The official runs in float16 on its device; ``dtype=auto`` does
that on CUDA and float32 on the CPU (float16 on the CPU is untested upstream).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from omnistory_core.api import ComponentError, EvalResult, Metric, Param
from omnistory_vistorybench.metrics import math as vmath
from omnistory_vistorybench.metrics._common import (
    batched,
    checkpoint_need,
    file_need,
    load_pretrained,
    media_exists,
    media_path,
    open_all,
    release_torch_memory,
    require_file,
    resolve_device,
    resolve_dtype,
    shot_images,
    story_images,
    torch_load,
)

OFFICIAL_ENCODER = "google/siglip-so400m-patch14-384"
#: the file the official code reads under ``data/pretrain``
OFFICIAL_HEAD = "aesthetic_predictor/aesthetic_predictor_v2_5.pth"
INPUT_SIZE = 378
#: the MLP's layer sizes after the encoder's hidden size, and the dropout after each but the last
HEAD_SIZES = (1024, 128, 64, 16, 1)
HEAD_DROPOUT = (0.5, 0.5, 0.5, 0.2)


def build_head(hidden_size: int) -> Any:
    """The scoring MLP as a module whose state dict has the official file's keys."""
    from torch import nn

    layers: list[Any] = []
    width = hidden_size
    for i, size in enumerate(HEAD_SIZES):
        layers.append(nn.Linear(width, size))
        if i < len(HEAD_DROPOUT):
            layers.append(nn.Dropout(HEAD_DROPOUT[i]))
        width = size
    head = nn.Module()
    head.add_module("scoring_head", nn.Sequential(*layers))
    return head


class AestheticPredictor:
    """``load(encoder, head)``, then ``score(images)`` -> one float per PIL image."""

    def __init__(self, *, device: str = "cpu", dtype: str = "auto", faithful: bool = True):
        self.device = device
        self.dtype_name = dtype
        self.faithful = faithful
        self.encoder: Any = None
        self.head: Any = None
        self.dtype: Any = None
        self.mean: tuple[float, ...] | None = None
        self.std: tuple[float, ...] | None = None

    def load(self, encoder: str, head_path: Any) -> AestheticPredictor:
        from transformers import SiglipVisionModel

        self.dtype = resolve_dtype(self.dtype_name, self.device)
        tower = load_pretrained(encoder, lambda: SiglipVisionModel.from_pretrained(encoder))
        head = build_head(int(tower.config.hidden_size))
        state = torch_load(head_path)
        try:
            head.load_state_dict(state)
        except RuntimeError as exc:  # wrong file or a head of another size
            raise ComponentError(
                f"{head_path}: not an aesthetic head: {exc}", "model_error"
            ) from exc
        if not self.faithful:
            from transformers import SiglipImageProcessor

            proc = load_pretrained(encoder, lambda: SiglipImageProcessor.from_pretrained(encoder))
            self.mean = tuple(float(v) for v in proc.image_mean)
            self.std = tuple(float(v) for v in proc.image_std)
        # transformers declares PreTrainedModel.to as functools.wraps(torch.nn.Module.to)
        self.encoder = tower.eval().to(self.device, self.dtype)  # pyright: ignore[reportArgumentType]
        self.head = head.eval().to(self.device, self.dtype)
        return self

    def preprocess(self, image: Any) -> Any:
        """One PIL image -> (3, 378, 378) float32: resized, in [0, 1] (normalised when not
        faithful)."""
        import numpy as np
        import torch
        from PIL import Image

        rgb = image if image.mode == "RGB" else image.convert("RGB")
        resized = rgb.resize((INPUT_SIZE, INPUT_SIZE), Image.Resampling.BILINEAR)
        pixels = torch.from_numpy(np.asarray(resized, dtype=np.float32) / 255.0).permute(2, 0, 1)
        if self.mean is not None and self.std is not None:
            mean = torch.tensor(self.mean).view(3, 1, 1)
            std = torch.tensor(self.std).view(3, 1, 1)
            pixels = (pixels - mean) / std
        return pixels.contiguous()

    def score(self, images: list[Any], batch_size: int = 8) -> list[float]:
        import torch

        if self.encoder is None:
            raise RuntimeError("AestheticPredictor.score before load()")
        out: list[float] = []
        for chunk in batched(images, batch_size):
            pixels = torch.stack([self.preprocess(im) for im in chunk])
            with torch.inference_mode():
                pooled = self.encoder(pixel_values=pixels.to(self.device, self.dtype)).pooler_output
                pooled = pooled / pooled.norm(dim=-1, keepdim=True)
                logits = self.head.scoring_head(pooled)
            out.extend(float(v) for v in logits[:, 0].float().cpu())
        return out


class AestheticMetric(Metric):
    """``aesthetic``: aesthetic-predictor-v2.5 score, averaged over a story's images.

    Reads (group scope), per item::

        {"candidate_shots": {shot_index: Media | None, ...},   # story order
         "story_images": [Media, ...]}       # every image in the story's output folder

    The story value is the mean over ``story_images`` (faithful; the listed shot images with
    ``faithful=false``, or when ``story_images`` is absent); no image: 0.0 (faithful, what the
    official saves) or an ``invalid`` row.  An unreadable image makes the story ``invalid``.
    ``detail["images"]`` has each image's score.

    Parameters: ``encoder`` (SigLIP checkpoint, hub id or local directory), ``head`` (path of
    ``aesthetic_predictor_v2_5.pth``), ``device``, ``dtype`` (auto: float16 on CUDA as the
    official, float32 on CPU), ``image_batch``, ``faithful``.
    """

    name = "aesthetic"
    version = "1"
    track = "quality"
    criteria = ("aesthetic_score",)
    scope = "group"
    reads = ("candidate_shots", "story_images")
    description = "aesthetic-predictor-v2.5 (SigLIP so400m + MLP head), mean over the story"
    parameters = (
        Param(
            "encoder",
            str,
            OFFICIAL_ENCODER,
            "SigLIP checkpoint: hub id or local directory",
            weights=True,
        ),
        Param(
            "head", (str, None), None, f"path of the head weights ({OFFICIAL_HEAD})", weights=True
        ),
        Param("device", (str, None), "auto", "auto | cpu | cuda[:N]", runtime=True),
        Param(
            "dtype",
            str,
            "auto",
            "auto (float16 on CUDA, float32 on CPU) | float16 | bfloat16 | float32",
            choices=("auto", "float16", "bfloat16", "float32"),
        ),
        Param("image_batch", int, 8, "images per forward pass", runtime=True, ge=1),
        Param("faithful", bool, True, "keep the official quirks (see math.FIDELITY)"),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._predictor: AestheticPredictor | None = None

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        return [str(params.get("encoder") or OFFICIAL_ENCODER)]

    def preflight_needs(self) -> list[dict[str, str]]:
        """The head file and the SigLIP checkpoint, checked by ``evaluate`` before scoring."""
        encoder = str(self.params.get("encoder") or OFFICIAL_ENCODER)
        local = Path(os.path.expanduser(encoder)).is_dir()
        needs = file_need(self.params.get("head"), "metric.aesthetic.head", OFFICIAL_HEAD)
        if not local:
            needs += checkpoint_need(encoder, "metric=aesthetic", "metric.aesthetic.encoder")
        return needs

    def load(self) -> None:
        head = require_file(
            self.params.get("head"),
            "metric=aesthetic",
            f"set head= to the official {OFFICIAL_HEAD}",
        )
        self._predictor = AestheticPredictor(
            device=resolve_device(self.params.get("device")),
            dtype=str(self.params.get("dtype") or "auto"),
            faithful=bool(self.params.get("faithful", True)),
        ).load(str(self.params["encoder"]), head)

    def unload(self) -> None:
        self._predictor = None
        release_torch_memory()

    def score_story(self, item: dict[str, Any]) -> EvalResult:
        if self._predictor is None:
            self.load()
        assert self._predictor is not None
        faithful = bool(self.params.get("faithful", True))
        pool = story_images(item) if faithful else []
        pool = pool or [m for m in shot_images(item) if media_exists(m)]
        if not pool:
            if faithful:
                return EvalResult({"aesthetic_score": 0.0}, detail={"images": []})
            return EvalResult(
                {"aesthetic_score": None},
                status="invalid",
                detail={"error": "no output image for this story"},
            )
        images, errors = open_all(pool)
        if errors:
            return EvalResult(
                {"aesthetic_score": None}, status="invalid", detail={"error": "; ".join(errors)}
            )
        scores = self._predictor.score(images, int(self.params.get("image_batch") or 8))
        per_image = [
            {"image": media_path(m), "score": s} for m, s in zip(pool, scores, strict=True)
        ]
        return EvalResult(
            {"aesthetic_score": vmath.story_mean(scores, faithful=faithful)},
            detail={"images": per_image},
        )

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        return [self.score_story(item) for item in items]


__all__ = [
    "AestheticMetric",
    "AestheticPredictor",
    "HEAD_SIZES",
    "INPUT_SIZE",
    "OFFICIAL_ENCODER",
    "OFFICIAL_HEAD",
    "build_head",
]
