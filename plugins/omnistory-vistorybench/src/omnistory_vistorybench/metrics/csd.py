"""CSD style similarity (``self_csd``, ``cross_csd``): the encoder and the story metric.

The official evaluator (``bench/style/csd_evaluator.py``) builds CSD's ``CSD_CLIP`` (a CLIP
ViT-L/14 whose projection is replaced by a style head), loads ``csd_vit-large.pth`` with
``strict=False``, and embeds each image as: RGB -> float32 in [0, 1] -> ``Resize((224, 224),
bicubic)`` on the tensor (antialiased) -> CLIP mean/std -> the ``style`` output, L2-normalised.

Here the network is our own (:class:`._csd_net.CSDStyleNet`) with the checkpoint's parameter
names, so the same file loads into it; width, depth, heads, patch and image size are parameters
(a test builds a tiny one).  The tensor resize is ``torch.nn.functional.interpolate(bicubic,
antialias=True)``, which is what torchvision's tensor ``Resize`` calls.  It runs on the CPU as
well: the official class defaults to ``device='cuda'`` and moves itself there when built, so the
official path needs a GPU.  Like the official, loading is ``strict=False``; unlike it, a file of
which no parameter loads (a wrong file or a wrapped state dict) is refused instead of scoring
with random weights, and the missing/unexpected keys are kept in :attr:`CSDEncoder.load_report`.
"""

from __future__ import annotations

from typing import Any

from omnistory_core.api import ComponentError, EvalResult, Metric, Param
from omnistory_vistorybench.metrics import math as vmath
from omnistory_vistorybench.metrics._common import (
    batched,
    candidate_shots,
    file_need,
    media_exists,
    media_path,
    open_rgb,
    release_torch_memory,
    require_file,
    resolve_device,
    shot_character_keys,
    shot_images,
    shot_index,
    story_characters,
    story_images,
    story_shots,
    torch_load,
)

#: CLIP's normalisation constants (what the official CSD preprocessing uses)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
#: the file the official code reads under ``data/pretrain``
OFFICIAL_CHECKPOINT = "csd/csd_vit-large.pth"


def _key(media: Any) -> str:
    return str(media_path(media))


def _content_key(media: Any) -> str:
    """Content hash when the input has one (references are shared across systems), else path."""
    return str(getattr(media, "sha256", None) or media_path(media))


class CSDEncoder:
    """The CSD style encoder: ``load(path)``, then ``embed(images)`` -> (n, embed_dim) array."""

    def __init__(
        self,
        *,
        image_size: int = 224,
        patch_size: int = 14,
        width: int = 1024,
        layers: int = 24,
        heads: int | None = None,
        embed_dim: int = 768,
        device: str = "cpu",
    ):
        self.image_size = image_size
        self.embed_dim = embed_dim
        self.arch: dict[str, Any] = dict(
            image_size=image_size,
            patch_size=patch_size,
            width=width,
            layers=layers,
            heads=heads,
            embed_dim=embed_dim,
        )
        self.device = device
        self.model: Any = None
        self.load_report: dict[str, list[str]] = {}

    def load(self, path: Any) -> CSDEncoder:
        import torch

        from omnistory_vistorybench.metrics._csd_net import CSDStyleNet

        state = torch_load(path)
        if not isinstance(state, dict):
            raise ComponentError(
                f"{path}: expected a state dict, got {type(state).__name__}", "model_error"
            )
        model = CSDStyleNet(**self.arch)
        result = model.load_state_dict(state, strict=False)
        own = set(model.state_dict())
        if not own & set(state):
            raise ComponentError(
                f"{path}: none of its {len(state)} keys is a CSD parameter (expected"
                " backbone.*, last_layer_style); refusing to score with random weights",
                "model_error",
            )
        self.load_report = {
            "missing_keys": list(result.missing_keys),
            "unexpected_keys": list(result.unexpected_keys),
        }
        for p in model.parameters():
            p.requires_grad_(False)
        self.model = model.eval().to(device=self.device, dtype=torch.float32)
        return self

    def preprocess(self, image: Any) -> Any:
        """One PIL image -> the (3, S, S) float32 tensor the network reads."""
        import numpy as np
        import torch

        size = self.image_size
        array = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
        pixels = torch.from_numpy(array).permute(2, 0, 1).unsqueeze(0)
        if tuple(pixels.shape[-2:]) != (size, size):
            pixels = torch.nn.functional.interpolate(
                pixels, size=(size, size), mode="bicubic", align_corners=False, antialias=True
            )
        mean = torch.tensor(CLIP_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(CLIP_STD).view(1, 3, 1, 1)
        return ((pixels - mean) / std)[0]

    def embed(self, images: list[Any], batch_size: int = 16) -> Any:
        import numpy as np
        import torch

        if self.model is None:
            raise RuntimeError("CSDEncoder.embed before load()")
        rows = []
        for chunk in batched(images, batch_size):
            pixels = torch.stack([self.preprocess(im) for im in chunk]).to(self.device)
            with torch.no_grad():
                rows.append(self.model(pixels).float().cpu().numpy())
        empty = np.zeros((0, self.embed_dim), np.float32)
        return np.concatenate(rows, axis=0) if rows else empty


class CSDMetric(Metric):
    """``csd``: style consistency within a story (``self_csd``) and with its character
    references (``cross_csd``), cosine of CSD style embeddings.  One result per story.

    Reads (group scope), per item::

        {"candidate_shots": {shot_index: Media | None, ...},   # story order
         "story_images": [Media, ...],       # every image in the story's output folder
         "characters": {key: {"name": str, "tag": str, "refs": [Media, ...]}, ...},
         "shots": [{"index": int, "character_key": [key, ...], ...}, ...]}

    * ``self_csd``: mean cosine over all unordered pairs of ``story_images`` (faithful; the
      story's shot images with ``faithful=false``; ``story_images`` absent: the shot images);
      0.0 with fewer than two images (None with ``faithful=false``);
    * ``cross_csd``: per story shot with an output image, the mean cosine to the first reference
      (``refs[0]``, the loader's sorted order) of each onstage character, then the mean over
      shots; the official fallbacks (:func:`.math.csd_reference`) with ``faithful``.

    No output image at all: 0.0 / 0.0 (faithful, as the official saves them) or an ``invalid``
    row.  An unreadable image makes the story ``invalid``.

    Parameters: ``checkpoint`` (path of ``csd_vit-large.pth``), ``device``, ``image_batch``
    (images per forward pass), ``cache_size`` (embeddings kept: references are shared by every
    system), ``faithful``, and the architecture (``image_size`` 224, ``patch_size`` 14,
    ``width`` 1024, ``layers`` 24, ``heads`` width/64, ``embed_dim`` 768: ViT-L/14).
    """

    name = "csd"
    version = "1"
    track = "style"
    criteria = ("self_csd", "cross_csd")
    scope = "group"
    score_range = (-1.0, 1.0)
    reads = ("candidate_shots", "story_images", "characters", "shots")
    description = "CSD style similarity: within the story and to the character references"
    parameters = (
        Param(
            "checkpoint",
            (str, None),
            None,
            f"path of the CSD weights ({OFFICIAL_CHECKPOINT})",
            weights=True,
        ),
        Param("device", (str, None), "auto", "auto | cpu | cuda[:N]", runtime=True),
        Param("image_batch", int, 16, "images per forward pass", runtime=True, ge=1),
        Param("cache_size", int, 4096, "embeddings kept in memory", runtime=True, ge=1),
        Param("faithful", bool, True, "keep the official quirks (see math.FIDELITY)"),
        Param("image_size", int, 224, "input resolution (the official: 224)", ge=1),
        Param("patch_size", int, 14, "ViT patch size (the official: 14)", ge=1),
        Param("width", int, 1024, "ViT width (the official: 1024)", ge=1),
        Param("layers", int, 24, "ViT depth (the official: 24)", ge=1),
        Param("heads", (int, None), None, "attention heads (null: width / 64)"),
        Param("embed_dim", int, 768, "style embedding size (the official: 768)", ge=1),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._encoder: CSDEncoder | None = None
        self._cache: dict[str, Any] = {}

    def preflight_needs(self) -> list[dict[str, str]]:
        """The weights file, checked by ``evaluate`` before scoring anything."""
        return file_need(
            self.params.get("checkpoint"), "metric.csd.checkpoint", OFFICIAL_CHECKPOINT
        )

    def load(self) -> None:
        path = require_file(
            self.params.get("checkpoint"),
            "metric=csd",
            f"set checkpoint= to the official {OFFICIAL_CHECKPOINT}",
        )
        arch = {k: self.params[k] for k in ("image_size", "patch_size", "width", "layers")}
        self._encoder = CSDEncoder(
            **arch,
            heads=self.params.get("heads"),
            embed_dim=self.params["embed_dim"],
            device=resolve_device(self.params.get("device")),
        ).load(path)
        self._cache = {}

    def unload(self) -> None:
        self._encoder = None
        self._cache = {}
        release_torch_memory()

    def _embed(self, media: list[Any]) -> dict[str, Any]:
        """Embeddings by path of ``media`` (each opened once; cached by content hash)."""
        if self._encoder is None:
            self.load()
        assert self._encoder is not None
        todo: dict[str, Any] = {}
        for m in media:
            key = _content_key(m)
            if key not in self._cache and key not in todo:
                todo[key] = open_rgb(m)
        keys = list(todo)
        if keys:
            rows = self._encoder.embed(
                [todo[k] for k in keys], int(self.params.get("image_batch") or 16)
            )
            for k, row in zip(keys, rows, strict=True):
                self._cache[k] = row
        out = {_key(m): self._cache[_content_key(m)] for m in media}
        limit = int(self.params.get("cache_size") or 4096)
        while len(self._cache) > limit:  # oldest first (dicts keep insertion order)
            self._cache.pop(next(iter(self._cache)))
        return out

    def score_story(self, item: dict[str, Any]) -> EvalResult:
        faithful = bool(self.params.get("faithful", True))
        shots_out = {i: m for i, m in candidate_shots(item).items() if media_exists(m)}
        listed = shot_images(item)
        pool = story_images(item) if faithful else []
        pool = pool or [m for m in listed if media_exists(m)]
        if not pool and not shots_out:
            if faithful:
                return EvalResult({"self_csd": 0.0, "cross_csd": 0.0}, detail={"images": 0})
            return EvalResult(
                {"self_csd": None, "cross_csd": None},
                status="invalid",
                detail={"error": "no output image for this story"},
            )
        characters = story_characters(item)
        first_refs = {k: (list(c.get("refs") or []) or [None])[0] for k, c in characters.items()}
        plan = vmath.csd_cross_pairs(
            [(shot_index(s), shot_character_keys(s)) for s in story_shots(item)],
            lambda i: i in shots_out,
            first_refs,
            faithful=faithful,
        )
        needed = list(pool) + list(shots_out.values()) + [r for _, ps in plan for _, r in ps]
        try:
            emb = self._embed(needed)
        except (OSError, ValueError) as exc:  # an unreadable image: this story only
            return EvalResult(
                {"self_csd": None, "cross_csd": None},
                status="invalid",
                detail={"error": f"cannot open image: {type(exc).__name__}: {exc}"},
            )
        import numpy as np

        pool_emb = np.stack([emb[_key(m)] for m in pool]) if pool else np.zeros((0, 1))
        self_csd = vmath.csd_self(pool_emb, faithful=faithful)
        shot_scores: list[list[float]] = []
        shot_detail = []
        for index, pairs in plan:
            out = emb[_key(shots_out[index])]
            scores = [float(vmath.cosine_matrix(emb[_key(ref)], out)[0, 0]) for _, ref in pairs]
            shot_scores.append(scores)
            shot_detail.append(
                {"index": index, "characters": [k for k, _ in pairs], "scores": scores}
            )
        cross_csd = vmath.csd_cross(shot_scores, faithful=faithful)
        # one undefined value (faithful=false) is a None score; the row is invalid only when
        # nothing could be scored
        status = "invalid" if self_csd is None and cross_csd is None else "ok"
        return EvalResult(
            {"self_csd": self_csd, "cross_csd": cross_csd},
            status=status,
            detail={"images": len(pool), "shots": shot_detail},
        )

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        return [self.score_story(item) for item in items]


__all__ = ["CLIP_MEAN", "CLIP_STD", "CSDEncoder", "CSDMetric", "OFFICIAL_CHECKPOINT"]
