"""ArcFace's face finder, as insightface 0.7.3's ``FaceAnalysis("antelopev2")`` runs it in the
official CIDS evaluator: SCRFD (``scrfd_10g_bnkps.onnx``) through onnxruntime, the detection
threshold stepped down until a face is found, and ``norm_crop``'s 5-point alignment.

* :class:`ScrfdDetector` -- the detector.  The image (BGR, as the official hands it over) is
  resized keeping its aspect ratio into the top-left corner of a black ``640x640`` canvas
  (``FaceAnalysis.prepare``'s ``det_size``; a graph with a fixed input size uses that),
  normalised to RGB ``(x - 127.5) / 128``; each stride's scores, distances and keypoints are
  decoded around the anchor centres (``num_anchors`` per cell, from the number of outputs);
  candidates at or above the threshold are sorted by score and reduced by non-maximum
  suppression (IoU over ``(x2 - x1 + 1)(y2 - y1 + 1)`` areas, 0.4).
* :func:`thresholds` -- the official ``det_thresh`` steps, ``0.45, 0.35, 0.25, 0.15`` (as its
  floating-point loop computes them).  The network output does not depend on the threshold, so
  it runs once per image and each step only filters (the same faces as re-running it).
* :func:`norm_crop` -- the similarity transform (Umeyama, with scale) of the 5 landmarks onto
  ArcFace's 112x112 template, then ``cv2.warpAffine`` (bilinear, black border).

Sorting: insightface sorts scores with numpy's default (unstable) argsort, reversed; ties are
ordered here by a stable argsort, reversed (the later candidate first), which is what the
default sort gives on small arrays and does not depend on the CPU.  onnxruntime and OpenCV are
imported when used.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from omnistory_core.api import ComponentError
from omnistory_vistorybench.metrics.face import SCRFD_FILE

#: ``FaceAnalysis.prepare``'s default ``det_size`` (width, height)
DET_SIZE = (640, 640)
#: the official evaluator's ``det_thresh`` stepping
THRESH_INITIAL, THRESH_MIN, THRESH_STEP = 0.45, 0.1, 0.1
#: SCRFD's non-maximum suppression IoU
NMS_THRESH = 0.4
#: SCRFD's input normalisation
INPUT_MEAN, INPUT_STD = 127.5, 128.0
#: ArcFace's 5-point template at 112x112 (left eye, right eye, nose, mouth left, mouth right)
ARCFACE_TEMPLATE = np.array(
    [
        [38.2946, 51.6963],
        [73.5318, 51.5014],
        [56.0252, 71.7366],
        [41.5493, 92.3655],
        [70.7299, 92.2041],
    ],
    dtype=np.float32,
)
#: outputs per SCRFD graph -> (strides, anchors per cell, keypoints)
LAYOUTS: dict[int, tuple[tuple[int, ...], int, bool]] = {
    6: ((8, 16, 32), 2, False),
    9: ((8, 16, 32), 2, True),
    10: ((8, 16, 32, 64, 128), 1, False),
    15: ((8, 16, 32, 64, 128), 1, True),
}


def thresholds(
    initial: float = THRESH_INITIAL, minimum: float = THRESH_MIN, step: float = THRESH_STEP
) -> list[float]:
    """The detection thresholds tried in turn until a face is found."""
    out, current = [], initial
    while current >= minimum:
        out.append(current)
        current -= step
    return out


def descending(scores: np.ndarray) -> np.ndarray:
    """Indices of ``scores`` from the highest; ties with the later index first."""
    return np.argsort(scores, kind="stable")[::-1]


def anchor_centres(height: int, width: int, stride: int, anchors: int) -> np.ndarray:
    """``(height * width * anchors, 2)`` float32 ``(x, y)`` centres, row-major, each cell's
    centre repeated ``anchors`` times."""
    ys, xs = np.mgrid[:height, :width]
    centres = np.stack([xs, ys], axis=-1).astype(np.float32) * stride
    centres = centres.reshape(-1, 2)
    return np.repeat(centres, anchors, axis=0) if anchors > 1 else centres


def distance_boxes(centres: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """Boxes ``(x1, y1, x2, y2)`` from (left, top, right, bottom) distances to the centres."""
    return np.stack(
        [
            centres[:, 0] - distance[:, 0],
            centres[:, 1] - distance[:, 1],
            centres[:, 0] + distance[:, 2],
            centres[:, 1] + distance[:, 3],
        ],
        axis=-1,
    )


def distance_points(centres: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """Keypoints ``(n, k, 2)`` from per-point (dx, dy) offsets to the centres."""
    n = distance.shape[0]
    return (distance.reshape(n, -1, 2) + centres[:, None, :]).astype(distance.dtype)


def nms(dets: np.ndarray, threshold: float = NMS_THRESH) -> list[int]:
    """Greedy suppression over ``(x1, y1, x2, y2, score)`` rows with insightface's ``+1`` pixel
    areas; a box overlapping a kept one by more than ``threshold`` IoU is dropped."""
    x1, y1, x2, y2, scores = (dets[:, i] for i in range(5))
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = descending(scores)
    keep: list[int] = []
    while order.size > 0:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]) + 1)
        h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]) + 1)
        inter = w * h
        overlap = inter / (areas[i] + areas[rest] - inter)
        order = rest[overlap <= threshold]
    return keep


def letterbox(bgr: np.ndarray, size: tuple[int, int]) -> tuple[np.ndarray, float]:
    """The image resized (aspect kept, bilinear) into the top-left of a black ``size`` (width,
    height) canvas, and the scale applied."""
    import cv2

    height, width = bgr.shape[:2]
    if height / width > size[1] / size[0]:
        new_h = size[1]
        new_w = int(new_h / (height / width))
    else:
        new_w = size[0]
        new_h = int(new_w * (height / width))
    canvas = np.zeros((size[1], size[0], 3), dtype=np.uint8)
    canvas[:new_h, :new_w] = cv2.resize(bgr, (new_w, new_h))
    return canvas, new_h / height


def blob(bgr: np.ndarray, mean: float, std: float) -> np.ndarray:
    """``cv2.dnn.blobFromImage(img, 1/std, size, (mean,)*3, swapRB=True)`` at the image's own
    size: RGB, ``(x - mean) / std``, ``(1, 3, H, W)`` float32."""
    rgb = bgr[:, :, ::-1].astype(np.float32)
    return np.ascontiguousarray(((rgb - mean) * np.float32(1.0 / std)).transpose(2, 0, 1)[None])


class ScrfdDetector:
    """SCRFD run with onnxruntime; :meth:`first_face` is the official stepping."""

    def __init__(self, *, device: str = "cpu"):
        self.device = device
        self.session: Any = None
        self.input_name = ""
        self.output_names: list[str] = []
        self.input_size = DET_SIZE
        self.strides: tuple[int, ...] = ()
        self.anchors = 1
        self.batched = False

    def load(self, path: str | Path) -> ScrfdDetector:
        from omnistory_vistorybench.metrics._arcface import _import, onnx_providers

        ort = _import("onnxruntime")
        file = Path(path)
        try:
            session = ort.InferenceSession(
                str(file), providers=onnx_providers(self.device, ort.get_available_providers())
            )
        except Exception as exc:  # not an ONNX model, or one onnxruntime cannot run
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise ComponentError(
                f"skipped: {file} cannot be loaded as an ONNX model: {type(exc).__name__}: {first}",
                "model_error",
            ) from exc
        outputs = session.get_outputs()
        layout = LAYOUTS.get(len(outputs))
        if layout is None or not layout[2]:
            raise ComponentError(
                f"skipped: {file} is not an SCRFD detector with keypoints (9 or 15 outputs"
                f" expected, got {len(outputs)})",
                "model_error",
            )
        self.strides, self.anchors, _ = layout
        shape = session.get_inputs()[0].shape
        if len(shape) == 4 and isinstance(shape[2], int) and isinstance(shape[3], int):
            self.input_size = (shape[3], shape[2])  # a fixed graph ignores det_size
        self.batched = len(outputs[0].shape) == 3
        self.input_name = session.get_inputs()[0].name
        self.output_names = [o.name for o in outputs]
        self.session = session
        return self

    def candidates(self, bgr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every anchor's (score, box, keypoints) in image pixels, before any threshold."""
        if self.session is None:
            raise RuntimeError("ScrfdDetector.candidates before load()")
        canvas, scale = letterbox(bgr, self.input_size)
        feed = {self.input_name: blob(canvas, INPUT_MEAN, INPUT_STD)}
        outs = self.session.run(self.output_names, feed)
        fmc = len(self.strides)
        height, width = canvas.shape[:2]
        scores, boxes, points = [], [], []
        for level, stride in enumerate(self.strides):
            score, dist, kps = outs[level], outs[level + fmc], outs[level + 2 * fmc]
            if self.batched:
                score, dist, kps = score[0], dist[0], kps[0]
            centres = anchor_centres(height // stride, width // stride, stride, self.anchors)
            scores.append(np.asarray(score, np.float32).reshape(-1))
            boxes.append(distance_boxes(centres, np.asarray(dist, np.float32) * stride))
            points.append(distance_points(centres, np.asarray(kps, np.float32) * stride))
        return (
            np.concatenate(scores),
            np.concatenate(boxes) / np.float32(scale),
            np.concatenate(points) / np.float32(scale),
        )

    @staticmethod
    def select(
        candidates: tuple[np.ndarray, np.ndarray, np.ndarray], threshold: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """``detect``'s faces at one threshold: ``(n, 5)`` boxes with scores and ``(n, 5, 2)``
        keypoints, by decreasing score after suppression."""
        scores, boxes, points = candidates
        chosen = np.where(scores >= threshold)[0]
        dets = np.hstack([boxes[chosen], scores[chosen, None]]).astype(np.float32)
        order = descending(dets[:, 4])
        dets, kps = dets[order], points[chosen][order]
        keep = nms(dets)
        return dets[keep], kps[keep]

    def first_face(self, bgr: np.ndarray, steps: Sequence[float] | None = None) -> Any:
        """The keypoints ``(5, 2)`` of the first face found at the highest threshold of
        ``steps`` (default :func:`thresholds`) that finds one; None when none does."""
        found = self.candidates(bgr)
        for threshold in thresholds() if steps is None else steps:
            _dets, kps = self.select(found, threshold)
            if len(kps):
                return kps[0]
        return None

    def unload(self) -> None:
        self.session = None


def umeyama(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The ``2x3`` similarity (rotation, uniform scale, translation) that maps ``src`` onto
    ``dst`` in the least-squares sense (Umeyama 1991; a reflection is never chosen)."""
    src = np.asarray(src, np.float64)
    dst = np.asarray(dst, np.float64)
    n, dim = src.shape
    src_mean, dst_mean = src.mean(axis=0), dst.mean(axis=0)
    src_c, dst_c = src - src_mean, dst - dst_mean
    cov = dst_c.T @ src_c / n
    d = np.ones(dim)
    if np.linalg.det(cov) < 0:
        d[-1] = -1
    u, s, vt = np.linalg.svd(cov)
    rank = np.linalg.matrix_rank(cov)
    if rank == 0:
        return np.full((2, 3), np.nan)
    rotation = u @ np.diag(d) @ vt
    if rank == dim - 1 and np.linalg.det(u) * np.linalg.det(vt) > 0:
        rotation = u @ vt
    elif rank == dim - 1:
        flip = d.copy()
        flip[-1] = -1
        rotation = u @ np.diag(flip) @ vt
    scale = (s @ d) / src_c.var(axis=0).sum()
    out = np.zeros((2, 3))
    out[:, :2] = scale * rotation
    out[:, 2] = dst_mean - scale * (rotation @ src_mean)
    return out


def arcface_matrix(landmarks: np.ndarray, size: int = 112) -> np.ndarray:
    """``estimate_norm``: the transform of 5 landmarks onto ArcFace's template at ``size``
    (a multiple of 112, or of 128 with the template shifted right by 8/128 of the size)."""
    if size % 112 == 0:
        ratio, shift = size / 112.0, 0.0
    elif size % 128 == 0:
        ratio, shift = size / 128.0, 8.0 * size / 128.0
    else:
        raise ValueError(f"ArcFace's alignment needs a size that 112 or 128 divides, got {size}")
    template = ARCFACE_TEMPLATE * ratio
    template[:, 0] += shift
    return umeyama(np.asarray(landmarks).reshape(5, 2), template)


def norm_crop(bgr: np.ndarray, landmarks: np.ndarray, size: int = 112) -> np.ndarray:
    """The face warped onto ArcFace's template: ``(size, size, 3)`` uint8, bilinear, black
    outside the image."""
    import cv2

    matrix = arcface_matrix(landmarks, size)
    return cv2.warpAffine(bgr, matrix, (size, size), borderValue=0.0)


__all__ = [
    "ARCFACE_TEMPLATE",
    "DET_SIZE",
    "SCRFD_FILE",
    "ScrfdDetector",
    "anchor_centres",
    "arcface_matrix",
    "blob",
    "descending",
    "distance_boxes",
    "distance_points",
    "letterbox",
    "nms",
    "norm_crop",
    "thresholds",
    "umeyama",
]
