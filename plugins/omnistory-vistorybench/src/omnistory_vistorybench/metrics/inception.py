"""Diversity (``inception_score``): Inception v3 class probabilities and the run-level metric.

As the official evaluator (``bench/diversity/inception_score.py``): torchvision's Inception v3
with the ImageNet weights (``inception_v3(pretrained=True, transform_input=False)``, the file
``inception_v3_google-0cc3c7bd.pth`` that torch hub downloads), each image ``Resize(299)``
(shorter side, PIL bilinear) + ``CenterCrop(299)`` + ``ToTensor()`` + ImageNet mean/std, batches
of 32, softmax of the logits, and the score of :func:`.math.inception_score` over every image of
the run with one split.  This is not torch-fidelity's TF-Inception IS.

Here the state dict is read from a file (``checkpoint``; by default where torch hub keeps it) and
loaded strictly into ``torchvision.models.inception_v3(weights=None, aux_logits=True,
init_weights=False, transform_input=False)``; where torchvision cannot be imported (its CUDA
wheel next to a CPU-only torch fails to import), into :mod:`._inception_net`, the same network
with the same parameter names (``backend``).  The preprocessing is written out with PIL and
numpy, step for step what those torchvision transforms do on a PIL image.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from omnistory_core.api import ComponentError, EvalResult, Metric, Param
from omnistory_vistorybench.metrics import math as vmath
from omnistory_vistorybench.metrics._common import (
    batched,
    file_need,
    open_all,
    release_torch_memory,
    require_file,
    resolve_device,
    torch_load,
)

#: the file name torch hub gives the ImageNet weights the official evaluator uses
OFFICIAL_FILE = "inception_v3_google-0cc3c7bd.pth"
INPUT_SIZE = 299
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def default_checkpoint() -> str:
    """Where torch hub stores the official weights (``$TORCH_HOME/hub/checkpoints``; torch's
    own rule, ``torch.hub.get_dir()``, without importing torch: call keys are computed before
    any model loads)."""
    torch_home = os.environ.get("TORCH_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "torch",
    )
    return str(Path(os.path.expanduser(torch_home)) / "hub" / "checkpoints" / OFFICIAL_FILE)


def torchvision_available() -> bool:
    try:
        import torchvision.models  # noqa: F401  # pyright: ignore[reportMissingImports]
    except Exception:  # a broken install raises RuntimeError, not only ImportError
        return False
    return True


def build_network(backend: str = "auto") -> tuple[Any, str]:
    """An untrained Inception v3 with the auxiliary head, and the backend that built it."""
    if backend in ("auto", "torchvision") and torchvision_available():
        from torchvision.models import inception_v3  # pyright: ignore[reportMissingImports]

        net = inception_v3(weights=None, aux_logits=True, init_weights=False, transform_input=False)
        return net, "torchvision"
    if backend == "torchvision":
        raise ComponentError("skipped: torchvision cannot be imported here", "model_error")
    from omnistory_vistorybench.metrics._inception_net import build_inception_v3

    return build_inception_v3(), "builtin"


def preprocess(image: Any) -> Any:
    """One PIL image -> (3, 299, 299) float32 tensor, as ``Resize(299)`` + ``CenterCrop(299)`` +
    ``ToTensor()`` + ``Normalize(ImageNet)``."""
    import numpy as np
    import torch
    from PIL import Image

    rgb = image if image.mode == "RGB" else image.convert("RGB")
    w, h = rgb.size
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = INPUT_SIZE, int(INPUT_SIZE * long / short)
    size = (new_short, new_long) if w <= h else (new_long, new_short)
    if size != (w, h):
        rgb = rgb.resize(size, Image.Resampling.BILINEAR)
    w, h = rgb.size
    top = int(round((h - INPUT_SIZE) / 2.0))
    left = int(round((w - INPUT_SIZE) / 2.0))
    rgb = rgb.crop((left, top, left + INPUT_SIZE, top + INPUT_SIZE))
    pixels = torch.from_numpy(np.asarray(rgb, dtype=np.float32) / 255.0).permute(2, 0, 1)
    mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
    return ((pixels - mean) / std).contiguous()


class InceptionClassifier:
    """``load(path)``, then ``probabilities(images)`` -> (n, 1000) softmax rows."""

    def __init__(self, *, device: str = "cpu", backend: str = "auto"):
        self.device = device
        self.backend = backend
        self.model: Any = None

    def load(self, path: Any) -> InceptionClassifier:
        net, self.backend = build_network(self.backend)
        state = torch_load(path)
        try:
            net.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise ComponentError(f"{path}: not Inception v3 weights: {exc}", "model_error") from exc
        self.model = net.eval().to(self.device)
        return self

    def probabilities(self, images: list[Any], batch_size: int = 32) -> Any:
        import numpy as np
        import torch

        if self.model is None:
            raise RuntimeError("InceptionClassifier.probabilities before load()")
        rows = []
        for chunk in batched(images, batch_size):
            pixels = torch.stack([preprocess(im) for im in chunk]).to(self.device)
            with torch.no_grad():
                logits = self.model(pixels)
            if isinstance(logits, tuple):  # torchvision's training-mode output
                logits = logits[0]
            rows.append(torch.softmax(logits, dim=1).cpu().numpy())
        return np.concatenate(rows, axis=0) if rows else np.zeros((0, 1000), np.float32)


#: ``images``: the published tables' pooled split images, or one run's own images
IMAGE_POOLS = ("pooled", "run")


class InceptionScoreMetric(Metric):
    """``diversity``: Inception Score of all of a run's images (one number per run).

    Reads (run scope), one item per run::

        {"candidate_images": [Media, ...],   # the split's images, every timestamp pooled
         "run_images": [Media, ...]}         # this run's images (its output folder)

    ``images`` picks the list: ``pooled`` (the default) is what the published lite and full
    tables hold, the official ``utils/add_inception_score_to_result_csv.py`` recomputation over
    every timestamp of the method, mode and language, restricted to the split's stories; ``run``
    is what the official ``bench_run.py`` summary holds, every image of this run's output folder
    (not filtered by split).  No image: 0.0 (faithful) or an ``invalid`` row; an unreadable
    image makes the run ``invalid`` (the official would fail).

    Parameters: ``checkpoint`` (the ImageNet state dict; null: torch hub's
    ``checkpoints/inception_v3_google-0cc3c7bd.pth``), ``device``, ``image_batch`` (32, the
    official; results do not depend on it), ``splits`` (1, the official), ``backend`` (auto |
    torchvision | builtin: the same network), ``images`` (pooled | run), ``faithful``.
    """

    name = "diversity"
    version = "2"
    track = "diversity"
    criteria = ("inception_score",)
    scope = "run"
    score_range = (0.0, 1000.0)
    reads = ("candidate_images", "run_images")
    description = "Inception Score (torchvision Inception v3, ImageNet weights, 1 split)"
    parameters = (
        Param(
            "checkpoint",
            (str, None),
            None,
            f"ImageNet state dict (null: torch hub's {OFFICIAL_FILE})",
            weights=True,
        ),
        Param("device", (str, None), "auto", "auto | cpu | cuda[:N]", runtime=True),
        Param("image_batch", int, 32, "images per forward pass", runtime=True, ge=1),
        Param("splits", int, 1, "IS splits (the official: 1)", ge=1),
        Param(
            "backend",
            str,
            "auto",
            "network code: auto (torchvision when importable) | torchvision | builtin",
            runtime=True,
            choices=("auto", "torchvision", "builtin"),
        ),
        Param(
            "images",
            str,
            "pooled",
            "pooled: the split's images over every timestamp (the published tables) | run:"
            " this run's output folder (the official bench_run summary)",
            choices=IMAGE_POOLS,
        ),
        Param("faithful", bool, True, "keep the official quirks (see math.FIDELITY)"),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._classifier: InceptionClassifier | None = None
        #: image sha256 -> its class probabilities under the loaded network
        self._probs: dict[str, Any] = {}

    def weights_files(self) -> dict[str, str]:
        """The ``checkpoint`` file, or torch hub's default one when it is unset: the weights
        this metric loads, whose content keys its calls."""
        from omnistory_core.kit.fingerprints import local_weights

        found = super().weights_files()
        if not self.params.get("checkpoint"):
            path = local_weights(default_checkpoint())
            if path is not None:
                found["checkpoint"] = str(path)
        return found

    def preflight_needs(self) -> list[dict[str, str]]:
        """The ImageNet state dict, checked by ``evaluate`` before scoring anything."""
        path = self.params.get("checkpoint") or str(default_checkpoint())
        return file_need(path, "metric.diversity.checkpoint", f"torchvision's {OFFICIAL_FILE}")

    def load(self) -> None:
        path = require_file(
            self.params.get("checkpoint") or default_checkpoint(),
            "metric=diversity",
            f"set checkpoint= to torchvision's ImageNet {OFFICIAL_FILE}",
        )
        self._classifier = InceptionClassifier(
            device=resolve_device(self.params.get("device")),
            backend=str(self.params.get("backend") or "auto"),
        ).load(path)
        self._probs = {}

    def unload(self) -> None:
        self._classifier = None
        self._probs = {}
        release_torch_memory()

    def score_run(self, item: dict[str, Any]) -> EvalResult:
        faithful = bool(self.params.get("faithful", True))
        pool = "run_images" if self.params.get("images") == "run" else "candidate_images"
        media = [m for m in item.get(pool) or [] if m is not None]
        if not media:
            if faithful:
                return EvalResult({"inception_score": 0.0}, detail={"images": 0})
            return EvalResult(
                {"inception_score": None}, status="invalid", detail={"error": "no output image"}
            )
        if self._classifier is None:
            self.load()
        assert self._classifier is not None
        # an image's class probabilities are computed once per load: a full run's lite unit
        # holds a subset of its whole-run images, and shots often repeat an image
        fresh = list({m.sha256: m for m in media if m.sha256 not in self._probs}.values())
        images, errors = open_all(fresh)
        if errors:
            return EvalResult(
                {"inception_score": None},
                status="invalid",
                detail={"error": "; ".join(errors[:20]), "unreadable": len(errors)},
            )
        if images:
            rows = self._classifier.probabilities(images, int(self.params.get("image_batch") or 32))
            self._probs.update(zip((m.sha256 for m in fresh), rows, strict=True))
        import numpy as np

        probs = np.stack([self._probs[m.sha256] for m in media])
        mean, std = vmath.inception_score(
            probs, int(self.params.get("splits") or 1), faithful=faithful
        )
        return EvalResult(
            {"inception_score": mean},
            detail={"images": len(images), "std": std, "backend": self._classifier.backend},
        )

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        return [self.score_run(item) for item in items]


__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "INPUT_SIZE",
    "InceptionClassifier",
    "InceptionScoreMetric",
    "OFFICIAL_FILE",
    "build_network",
    "default_checkpoint",
    "preprocess",
    "torchvision_available",
]
