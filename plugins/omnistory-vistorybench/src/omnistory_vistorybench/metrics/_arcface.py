"""ArcFace of insightface's ``antelopev2`` pack: its recognition network ``glintr100.onnx``
run directly with onnxruntime, with the input conventions of insightface's ``ArcFaceONNX``.

insightface itself is not installed (its wheel builds C++ from source); what the official
evaluator gets from ``FaceAnalysis("antelopev2")`` for a face is, once the face is aligned,
``ArcFaceONNX.get_feat``: ``cv2.dnn.blobFromImages(faces, 1 / std, (w, h), (mean,) * 3,
swapRB=True)`` -- the BGR face turned RGB, ``(x - mean) / std``, NCHW -- then the network's
single output.  ``mean``/``std`` are 127.5/127.5 except for MXNet exports, which carry the
normalisation in the graph: insightface recognises those by a ``Sub``/``_minus`` and a
``Mul``/``_mul`` node among the first 8 and then feeds raw pixels (0.0/1.0); so does this
module (reading the graph with ``onnx``, as insightface does).  The session asks for the CUDA
execution provider first and falls back to the CPU one, as the official does.

The face it embeds comes from the aligner of :mod:`.face`: by default (``face_alignment:
official``) SCRFD's first face warped onto ArcFace's template (:mod:`._scrfd`), as
``FaceAnalysis.get`` does; with ``whole_crop`` the crop resized whole to the input size.
onnxruntime and onnx are imported in :meth:`load`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omnistory_core.api import ComponentError
from omnistory_vistorybench.metrics._common import require_file
from omnistory_vistorybench.metrics._face_crops import face_pixels

# numpy is imported where it is used: registering the metrics (in every process that discovers
# the plugins) stays without it
if TYPE_CHECKING:
    import numpy as np

#: the recognition model of the antelopev2 pack (insightface's ``models/antelopev2/``)
ARCFACE_FILE = "insightface/models/antelopev2/glintr100.onnx"
#: insightface's normalisation of a PyTorch-exported recognition model (glintr100 is one)
TORCH_MEAN_STD = (127.5, 127.5)
#: MXNet exports normalise inside the graph: raw pixels go in
MXNET_MEAN_STD = (0.0, 1.0)
#: how many leading graph nodes insightface inspects for the MXNet normalisation
NODES_INSPECTED = 8

_HINT = f"set arcface_weights= to {ARCFACE_FILE} (insightface's antelopev2 pack)"


def input_mean_std(node_names: Sequence[str]) -> tuple[float, float]:
    """insightface's rule: an MXNet export (a ``Sub``/``_minus`` and a ``Mul``/``_mul`` node
    among the first 8) takes raw pixels, any other model ``(x - 127.5) / 127.5``."""
    head = list(node_names)[:NODES_INSPECTED]
    has_sub = any(n.startswith(("Sub", "_minus")) for n in head)
    has_mul = any(n.startswith(("Mul", "_mul")) for n in head)
    return MXNET_MEAN_STD if has_sub and has_mul else TORCH_MEAN_STD


def onnx_providers(device: str, available: Sequence[str]) -> list[Any]:
    """The execution providers of the session: CUDA first when the device is a CUDA one and
    onnxruntime has that provider (``cuda:N`` selects GPU N), the CPU always as the fallback."""
    providers: list[Any] = []
    if device.startswith("cuda") and "CUDAExecutionProvider" in available:
        _, _, index = device.partition(":")
        providers.append(("CUDAExecutionProvider", {"device_id": int(index or 0)}))
    providers.append("CPUExecutionProvider")
    return providers


def _import(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ComponentError(
            f"skipped: the arcface face model needs {module}: pip install {module}"
            " (the omnistory-vistorybench[metrics] extra has it)",
            "model_error",
        ) from exc


class ArcFaceEmbedder:
    """``embed(images) -> (n, d)`` float32 unit rows from an antelopev2-style recognition ONNX
    model (``glintr100.onnx``: input ``(N, 3, 112, 112)`` float, output ``(N, 512)``)."""

    name = "arcface"

    def __init__(self, *, device: str = "cpu", batch_size: int = 16):
        self.device = device
        self.batch_size = batch_size
        self.session: Any = None
        self.input_name = ""
        self.output_name = ""
        self.size = 112
        self.mean, self.std = TORCH_MEAN_STD
        #: the providers the session ended up with (CUDA first when it could be used)
        self.providers: list[str] = []

    def load(self, path: str | None) -> ArcFaceEmbedder:
        file = require_file(path, "the arcface face model", _HINT)
        onnx = _import("onnx")
        ort = _import("onnxruntime")
        try:
            # the node names are all insightface reads; the weights stay on disk for onnx
            graph = onnx.load(str(file), load_external_data=False).graph
            self.mean, self.std = input_mean_std([node.name for node in graph.node])
            session = ort.InferenceSession(
                str(file), providers=onnx_providers(self.device, ort.get_available_providers())
            )
        except Exception as exc:  # not an ONNX model, or one onnxruntime cannot run
            raise ComponentError(
                f"skipped: {file} cannot be loaded as an ONNX model: {type(exc).__name__}:"
                f" {str(exc).splitlines()[0] if str(exc) else ''}",
                "model_error",
            ) from exc
        self._check_signature(session, file)
        self.session = session
        self.providers = list(session.get_providers())
        return self

    def _check_signature(self, session: Any, file: Path) -> None:
        """One ``(N, 3, S, S)`` input and one output, as insightface asserts for a recognition
        model; a fixed batch dimension caps the batch size."""
        inputs, outputs = session.get_inputs(), session.get_outputs()
        shape = list(inputs[0].shape) if len(inputs) == 1 else []
        if len(inputs) != 1 or len(outputs) != 1 or len(shape) != 4 or shape[1] != 3:
            got = [(i.name, i.shape) for i in inputs]
            raise ComponentError(
                f"skipped: {file} is not a face recognition model (one (N, 3, H, W) input and"
                f" one output expected; inputs {got}, {len(outputs)} output(s))",
                "model_error",
            )
        height, width = shape[2], shape[3]
        if isinstance(height, int) and isinstance(width, int):
            if height != width:
                raise ComponentError(
                    f"skipped: {file} takes {width}x{height} faces; a square input is expected",
                    "model_error",
                )
            self.size = height
        if isinstance(shape[0], int) and shape[0] > 0:
            self.batch_size = min(self.batch_size, shape[0])
        self.input_name, self.output_name = inputs[0].name, outputs[0].name

    def blob(self, bgr: np.ndarray) -> np.ndarray:
        """``blobFromImages(..., swapRB=True)`` of ``(n, S, S, 3)`` BGR uint8 faces: RGB,
        ``(x - mean) / std``, NCHW float32."""
        import numpy as np

        rgb = bgr[:, :, :, ::-1].astype(np.float32)
        return np.ascontiguousarray(((rgb - self.mean) / self.std).transpose(0, 3, 1, 2))

    def embed(self, images: Sequence[Any]) -> np.ndarray:
        """The crops resized whole to the input size (the ``whole_crop`` alignment)."""
        return self.embed_faces(face_pixels(images, self.size))

    def embed_faces(self, bgr: np.ndarray) -> np.ndarray:
        """``(n, d)`` unit rows of ``(n, S, S, 3)`` uint8 BGR faces (aligned, or whole crops)."""
        import numpy as np

        if self.session is None:
            raise RuntimeError("ArcFaceEmbedder.embed before load()")
        rows = []
        for start in range(0, len(bgr), self.batch_size):
            chunk = bgr[start : start + self.batch_size]
            out = self.session.run([self.output_name], {self.input_name: self.blob(chunk)})[0]
            feats = np.asarray(out, dtype=np.float32).reshape(len(chunk), -1)
            # the official compares ArcFace features by cosine: unit rows
            norms = np.linalg.norm(feats, axis=1, keepdims=True)
            rows.append(feats / np.maximum(norms, 1e-12))
        return np.concatenate(rows) if rows else np.zeros((0, 512), np.float32)

    def unload(self) -> None:
        self.session = None


__all__ = [
    "ARCFACE_FILE",
    "ArcFaceEmbedder",
    "input_mean_std",
    "onnx_providers",
]
