"""The face encoders of CIDS's ``realistic_human`` characters: ArcFace, FaceNet, AdaFace and
``face_mix``.

The official evaluator (``bench/content/cids_evaluator.py``) embeds a ``realistic_human`` crop
with three face models and compares two crops by the mean, over the models that produced a
feature for both, of their cosine (``ensemble_method: average``; no model in common: 0.0):

* ArcFace -- insightface ``FaceAnalysis("antelopev2")`` (ONNX: SCRFD detection, det_thresh
  stepped 0.45 -> 0.1 until a face is found, then ``glintr100.onnx`` on the aligned face, RGB,
  ``(x - 127.5) / 127.5``);
* AdaFace IR-101 -- ``adaface/adaface_ir101_webface12m.ckpt``, input BGR, ``(x/255 - 0.5)/0.5``;
* FaceNet ``InceptionResnetV1`` (vggface2) -- ``facenet/20180402-114759-vggface2.pt``, input
  the aligned face as OpenCV gives it: BGR, ``x/255``.

AdaFace and FaceNet read the face that facexlib's ``FaceRestoreHelper`` (RetinaFace ResNet-50,
5 landmarks) finds and warps to 112x112.  Here:

* :class:`FaceNetEmbedder` and :class:`AdaFaceEmbedder` are ports (architectures in
  :mod:`._face_nets`, the official weight files loaded strictly from paths given as
  parameters), with the official input conventions above;
* :class:`~._arcface.ArcFaceEmbedder` runs the official ``glintr100.onnx`` itself with
  onnxruntime (insightface builds from source), with ``ArcFaceONNX``'s input conventions;
* :class:`FaceMixEncoder` is ``face_mix`` over the models it is given (``face_models``; the
  official trio is ``arcface, adaface, facenet``), and the ``arcface`` encoder is a
  ``face_mix`` of ArcFace alone (its cosine).

A model whose weights parameter is unset or names no file raises a ``skipped:``
ComponentError naming that parameter, so a story that needs it is an ``error`` row, never a 0.

Faces, as the official finds them (``face_alignment: official``, the default): ArcFace embeds
SCRFD's first face aligned onto its 112x112 template (:mod:`._scrfd`: ``scrfd_10g_bnkps.onnx``,
the threshold stepped 0.45 -> 0.15); AdaFace and FaceNet embed RetinaFace's first face aligned
as facexlib's ``FaceRestoreHelper(face_size=112)`` does (:mod:`._retinaface`:
``detection_Resnet50_Final.pth``).  A model that finds no face in a crop has no feature for it,
and a crop with no model's feature is dropped (:attr:`Encoded.indices` leaves it out), so a
face-less detector box is invalid in the matching.  ``face_alignment: whole_crop`` (the option
kept from before the detectors were ported) embeds every crop whole, resized to 112x112
(bilinear), by every model: every crop is a face.
No heavy import at module level.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omnistory_core.api import ComponentError
from omnistory_vistorybench.metrics._arcface import ArcFaceEmbedder
from omnistory_vistorybench.metrics._common import (
    release_torch_memory,
    require_file,
    torch_load,
)
from omnistory_vistorybench.metrics._face_crops import FACE_SIZE, SCRFD_FILE, face_pixels
from omnistory_vistorybench.metrics.clip_encoder import Encoded

# numpy is imported where it is used: registering the metrics (in every process that discovers
# the plugins) stays without it
if TYPE_CHECKING:
    import numpy as np

#: the official weight files (under the official ``data/pretrain``)
FACENET_FILE = "facenet/20180402-114759-vggface2.pt"
ADAFACE_FILE = "adaface/adaface_ir101_webface12m.ckpt"
#: the official face_mix members, in the order it computes them
OFFICIAL_FACE_MODELS = ("arcface", "adaface", "facenet")
#: ``face_alignment``: ``official`` (detect and align, face-less crops dropped) or
#: ``whole_crop`` (every crop embedded whole)
FACE_ALIGNMENTS = ("official", "whole_crop")


class _TorchFaceEmbedder:
    """Shared batching of the two PyTorch face models: ``embed_faces(bgr) -> (n, 512)``
    float32 unit rows of ``(n, 112, 112, 3)`` uint8 BGR faces."""

    name = ""
    #: the face size the model reads
    size = FACE_SIZE

    def __init__(self, *, device: str = "cpu", batch_size: int = 16):
        self.device = device
        self.batch_size = batch_size
        self.model: Any = None

    def unload(self) -> None:
        self.model = None
        release_torch_memory()

    def load(self, path: str | None) -> _TorchFaceEmbedder:  # pragma: no cover - per model
        raise NotImplementedError

    def tensor(self, bgr: np.ndarray) -> Any:  # pragma: no cover - each model defines it
        raise NotImplementedError

    def forward(self, batch: Any) -> Any:  # pragma: no cover - each model defines it
        raise NotImplementedError

    def embed(self, images: Sequence[Any]) -> np.ndarray:
        """The crops resized whole to 112x112 (the ``whole_crop`` alignment)."""
        return self.embed_faces(face_pixels(images, self.size))

    def embed_faces(self, bgr: np.ndarray) -> np.ndarray:
        import numpy as np
        import torch

        if self.model is None:
            raise RuntimeError(f"{type(self).__name__}.embed before load()")
        rows = []
        for start in range(0, len(bgr), self.batch_size):
            batch = self.tensor(bgr[start : start + self.batch_size]).to(self.device)
            with torch.no_grad():
                feats = self.forward(batch).float()
            # the official normalises every model's feature again before the cosine
            rows.append(torch.nn.functional.normalize(feats, p=2, dim=1).cpu().numpy())
        return np.concatenate(rows) if rows else np.zeros((0, 512), np.float32)


class FaceNetEmbedder(_TorchFaceEmbedder):
    """FaceNet InceptionResnetV1 (vggface2) from the official ``20180402-114759-vggface2.pt``."""

    name = "facenet"

    def load(self, path: str | None) -> FaceNetEmbedder:
        from omnistory_vistorybench.metrics._face_nets import InceptionResnetV1

        file = require_file(
            path, "the FaceNet face model", f"set facenet_weights= to {FACENET_FILE}"
        )
        net = InceptionResnetV1()
        _load_strict(net, torch_load(file), file)
        self.model = net.eval().to(self.device)
        return self

    def tensor(self, bgr: np.ndarray) -> Any:
        import torch

        # the official: torch.tensor(aligned_bgr).float() / 255, HWC -> CHW, no standardisation
        return torch.from_numpy(bgr.copy()).float().div(255.0).permute(0, 3, 1, 2)

    def forward(self, batch: Any) -> Any:
        return self.model(batch)


class AdaFaceEmbedder(_TorchFaceEmbedder):
    """AdaFace IR-101 from the official ``adaface_ir101_webface12m.ckpt`` (a Lightning
    checkpoint: its ``state_dict``'s ``model.`` entries) or a plain state dict of the backbone."""

    name = "adaface"

    def load(self, path: str | None) -> AdaFaceEmbedder:
        from omnistory_vistorybench.metrics._face_nets import ir_backbone

        file = require_file(
            path, "the AdaFace face model", f"set adaface_weights= to {ADAFACE_FILE}"
        )
        try:
            raw = torch_load(file)
        except Exception as exc:  # e.g. a checkpoint that pickles non-tensor objects
            raise ComponentError(
                f"skipped: {file} cannot be read as tensors only (weights_only=True):"
                f" {type(exc).__name__}: {exc}; save its state_dict alone with torch.save and"
                " point adaface_weights at that file",
                "model_error",
            ) from exc
        net = ir_backbone(100)
        _load_strict(net, adaface_state_dict(raw), file)
        self.model = net.eval().to(self.device)
        return self

    def tensor(self, bgr: np.ndarray) -> Any:
        import torch

        # AdaFace's to_input: BGR, ((x / 255) - 0.5) / 0.5
        return torch.from_numpy(bgr.copy()).float().div(255.0).sub(0.5).div(0.5).permute(0, 3, 1, 2)

    def forward(self, batch: Any) -> Any:
        feature, _norm = self.model(batch)
        return feature


def adaface_state_dict(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The backbone weights of an AdaFace checkpoint, as the official ``load_pretrained_model``
    takes them: ``state_dict`` entries starting with ``model.``, prefix stripped (the margin
    head's ``head.*`` left out).  A plain backbone state dict is returned as it is."""
    inner = raw.get("state_dict", raw)
    if any(str(k).startswith("model.") for k in inner):
        return {str(k)[6:]: v for k, v in inner.items() if str(k).startswith("model.")}
    return dict(inner)


def _load_strict(net: Any, state: Mapping[str, Any], file: Path) -> None:
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0]
        raise ComponentError(
            f"skipped: {file} does not fit {type(net).__name__}: {first}", "model_error"
        ) from exc


#: the face models this environment has: name -> (embedder class, weights parameter)
FACE_MODELS: dict[str, tuple[type[Any], str]] = {
    "arcface": (ArcFaceEmbedder, "arcface_weights"),
    "facenet": (FaceNetEmbedder, "facenet_weights"),
    "adaface": (AdaFaceEmbedder, "adaface_weights"),
}
#: the face models declared but not available, and why (none at present; a model listed here
#: is refused by name before any weights are looked for)
UNAVAILABLE_FACE_MODELS: dict[str, str] = {}


class WholeCrop:
    """The ``whole_crop`` alignment: every crop resized whole (bilinear) is a face."""

    def faces(self, images: Sequence[Any], size: int) -> list[Any]:
        return list(face_pixels(images, size))


class ScrfdFaces:
    """ArcFace's faces: SCRFD's first face (the threshold stepped down until one is found)
    warped onto ArcFace's template at the recognition model's input size; None: no face."""

    def __init__(self, detector: Any):
        self.detector = detector

    def faces(self, images: Sequence[Any], size: int) -> list[Any]:
        from omnistory_vistorybench.metrics._scrfd import norm_crop

        out = []
        for bgr in _bgr_images(images):
            landmarks = self.detector.first_face(bgr)
            out.append(None if landmarks is None else norm_crop(bgr, landmarks, size))
        return out

    def unload(self) -> None:
        self.detector.unload()


class RetinaFaces:
    """AdaFace's and FaceNet's faces: RetinaFace's first face, aligned by facexlib's rule at
    its face size (112, whatever the model); None: no face."""

    def __init__(self, aligner: Any):
        self.aligner = aligner

    def faces(self, images: Sequence[Any], size: int) -> list[Any]:
        return [self.aligner.aligned(bgr) for bgr in _bgr_images(images)]

    def unload(self) -> None:
        self.aligner = None
        release_torch_memory()


def _bgr_images(images: Sequence[Any]) -> list[np.ndarray]:
    """PIL crops as the official hands them to the face tools: ``cv2.cvtColor(np.array(img),
    COLOR_RGB2BGR)`` (uint8 BGR)."""
    import numpy as np

    return [
        np.ascontiguousarray(np.asarray(im if im.mode == "RGB" else im.convert("RGB"))[:, :, ::-1])
        for im in images
    ]


WHOLE_CROP = WholeCrop()


class FaceMixEncoder:
    """``face_mix``: per crop one feature per model that finds a face in it; the similarity of
    two crops is the mean of the per-model cosines over the models both have (0.0 with none),
    the official ``ensemble_method: average``.  Features are ``{model name: unit vector}``
    dicts; a crop without any model's feature is left out of :attr:`Encoded.indices`.

    ``aligners`` maps a model name to what finds and aligns its faces (``faces(images, size)
    -> [uint8 BGR face or None]``); a model without one embeds whole crops.  Models sharing an
    aligner share its detections."""

    def __init__(self, embedders: Mapping[str, Any], aligners: Mapping[str, Any] | None = None):
        if not embedders:
            raise ValueError("face_mix needs at least one face model")
        self.embedders = dict(embedders)
        self.aligners = dict(aligners or {})

    def encode(self, images: Sequence[Any]) -> Encoded:
        import numpy as np

        if not images:
            return Encoded()
        found: dict[tuple[int, int], list[Any]] = {}
        per_model: dict[str, dict[int, np.ndarray]] = {}
        for name, embedder in self.embedders.items():
            aligner = self.aligners.get(name, WHOLE_CROP)
            size = int(getattr(embedder, "size", FACE_SIZE))
            key = (id(aligner), size)
            if key not in found:
                found[key] = aligner.faces(images, size)
            faces = found[key]
            idx = [i for i, face in enumerate(faces) if face is not None]
            rows = embedder.embed_faces(np.stack([faces[i] for i in idx])) if idx else []
            per_model[name] = dict(zip(idx, rows, strict=True))
        indices, feats = [], []
        for i in range(len(images)):
            feat = {name: rows[i] for name, rows in per_model.items() if i in rows}
            if feat:  # the official drops a crop in which no model finds a face
                indices.append(i)
                feats.append(feat)
        return Encoded(indices, feats)

    def similarity(self, a: Sequence[Any], b: Sequence[Any]) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(a), len(b)), dtype=np.float64)
        for i, fa in enumerate(a):
            for j, fb in enumerate(b):
                common = [m for m in fa if m in fb]
                if common:
                    out[i, j] = sum(float(np.dot(fa[m], fb[m])) for m in common) / len(common)
        return out

    def unload(self) -> None:
        for embedder in self.embedders.values():
            embedder.unload()
        for aligner in {id(a): a for a in self.aligners.values()}.values():
            unload = getattr(aligner, "unload", None)
            if callable(unload):
                unload()


def face_model_names(value: Any) -> list[str]:
    """``face_models`` as a list of names (a list, or a comma-separated string)."""
    items = value.split(",") if isinstance(value, str) else list(value or [])
    return [str(v).strip() for v in items if str(v).strip()]


def build_face_mix(params: Mapping[str, Any], device: str) -> FaceMixEncoder:
    """The ``face_mix`` encoder of the metric's parameters: every model of ``face_models``
    loaded from its weights parameter, with the face finders of ``face_alignment`` (official:
    SCRFD for ArcFace, RetinaFace for AdaFace and FaceNet); one that is unknown, unavailable or
    lacks its weights raises a ``skipped:`` ComponentError (the stories that need it are
    ``error`` rows)."""
    names = face_model_names(params.get("face_models", OFFICIAL_FACE_MODELS))
    if not names:
        raise ComponentError("skipped: face_mix needs at least one of face_models", "model_error")
    alignment = str(params.get("face_alignment") or "official")
    if alignment not in FACE_ALIGNMENTS:
        raise ComponentError(
            f"skipped: unknown face_alignment {alignment!r}; known: {', '.join(FACE_ALIGNMENTS)}",
            "model_error",
        )
    batch = int(params.get("image_batch") or 16)
    embedders: dict[str, Any] = {}
    for name in names:
        if name in UNAVAILABLE_FACE_MODELS:
            raise ComponentError(
                f"skipped: the {name} face model is not available: {UNAVAILABLE_FACE_MODELS[name]};"
                f" list the others in face_models= (e.g. adaface,facenet), a documented departure",
                "model_error",
            )
        if name not in FACE_MODELS:
            known = ", ".join(sorted([*FACE_MODELS, *UNAVAILABLE_FACE_MODELS]))
            raise ComponentError(
                f"skipped: unknown face model {name!r} in face_models; known: {known}",
                "model_error",
            )
        cls, weights = FACE_MODELS[name]
        embedders[name] = cls(device=device, batch_size=batch).load(params.get(weights))
    aligners: dict[str, Any] = {}
    if alignment == "official":
        aligners = official_aligners(params, list(embedders), device)
    return FaceMixEncoder(embedders, aligners)


def scrfd_weights(params: Mapping[str, Any]) -> str | None:
    """``scrfd_weights``, else ``scrfd_10g_bnkps.onnx`` beside ``arcface_weights`` (both are
    files of the antelopev2 pack folder)."""
    if params.get("scrfd_weights"):
        return str(params["scrfd_weights"])
    arcface = params.get("arcface_weights")
    return str(Path(os.path.expanduser(str(arcface))).parent / SCRFD_FILE) if arcface else None


def official_aligners(params: Mapping[str, Any], names: Sequence[str], device: str) -> dict:
    """The official face finders of the models ``names``: SCRFD for ArcFace, one RetinaFace
    shared by AdaFace and FaceNet (the official's one ``FaceRestoreHelper``)."""
    aligners: dict[str, Any] = {}
    if "arcface" in names:
        from omnistory_vistorybench.metrics._scrfd import ScrfdDetector

        file = require_file(
            scrfd_weights(params),
            "the SCRFD face detector of ArcFace",
            f"set scrfd_weights= to antelopev2's {SCRFD_FILE} (or face_alignment=whole_crop)",
        )
        aligners["arcface"] = ScrfdFaces(ScrfdDetector(device=device).load(file))
    torch_models = [n for n in names if n in ("adaface", "facenet")]
    if torch_models:
        from omnistory_vistorybench.metrics._retinaface import FaceRestoreAligner, load_retinaface

        shared = RetinaFaces(
            FaceRestoreAligner(load_retinaface(params.get("retinaface_weights"), device))
        )
        aligners.update(dict.fromkeys(torch_models, shared))
    return aligners


def build_arcface(params: Mapping[str, Any], device: str) -> FaceMixEncoder:
    """The ``arcface`` encoder (the official without the multi-face ensemble): ArcFace alone,
    whatever ``face_models`` lists, so two crops compare by its cosine."""
    return build_face_mix({**params, "face_models": ["arcface"]}, device)


__all__ = [
    "ADAFACE_FILE",
    "AdaFaceEmbedder",
    "FACENET_FILE",
    "FACE_MODELS",
    "FACE_ALIGNMENTS",
    "FaceMixEncoder",
    "FaceNetEmbedder",
    "OFFICIAL_FACE_MODELS",
    "RetinaFaces",
    "ScrfdFaces",
    "UNAVAILABLE_FACE_MODELS",
    "WholeCrop",
    "adaface_state_dict",
    "build_arcface",
    "build_face_mix",
    "face_model_names",
    "official_aligners",
    "scrfd_weights",
]
