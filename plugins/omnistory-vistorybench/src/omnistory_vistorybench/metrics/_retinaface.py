"""AdaFace's and FaceNet's face finder, as facexlib 0.3.0's ``FaceRestoreHelper(upscale_factor=1,
face_size=112, crop_ratio=(1, 1), det_model="retinaface_resnet50")`` runs it in the official CIDS
evaluator.

* :class:`RetinaFace` -- RetinaFace with a ResNet-50 body, written out with facexlib's module
  names so that its ``detection_Resnet50_Final.pth`` loads strictly (a ``module.`` prefix is
  stripped, as facexlib does).  torchvision is not needed: the ResNet-50 is the plain bottleneck
  network torchvision builds (stride on the 3x3 convolution).
* :func:`detect_faces` -- ``RetinaFace.detect_faces(img, 0.97)`` at the original size: BGR
  float pixels minus ``(104, 117, 123)``, the network, the priors (min sizes 16/32, 64/128,
  256/512 at strides 8/16/32), the box and landmark decoding (variances 0.1, 0.2), scores above
  0.97, sorted, non-maximum suppression at IoU 0.4 (torchvision's: no ``+1`` in the areas, a box
  overlapping a kept one by more than the threshold is dropped).
* :class:`FaceRestoreAligner` -- ``get_face_landmarks_5`` then ``align_warp_face`` for the first
  face: ``cv2.estimateAffinePartial2D(landmarks, template, method=cv2.LMEDS)`` onto the FFHQ
  5-point template scaled to 112, and ``cv2.warpAffine`` with the grey border (135, 133, 132).
  No face: None (the official then has no AdaFace or FaceNet feature for that crop).

torch is imported at module level: load this module only when a face model loads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from omnistory_core.api import ComponentError
from omnistory_vistorybench.metrics.face import RETINAFACE_FILE

#: ``FaceRestoreHelper.get_face_landmarks_5``'s confidence threshold
CONF_THRESHOLD = 0.97
NMS_THRESHOLD = 0.4
#: BGR means subtracted from the pixels
MEAN_BGR = (104.0, 117.0, 123.0)
MIN_SIZES = ((16, 32), (64, 128), (256, 512))
STEPS = (8, 16, 32)
VARIANCES = (0.1, 0.2)
#: the FFHQ 5-point template at 512x512, scaled to the face size
FFHQ_TEMPLATE_512 = np.array(
    [
        [192.98138, 239.94708],
        [318.90277, 240.1936],
        [256.63416, 314.01935],
        [201.26117, 371.41043],
        [313.08905, 371.15118],
    ]
)
FACE_SIZE = 112
#: ``align_warp_face``'s border colour (BGR)
BORDER_BGR = (135, 133, 132)


# -- the network --------------------------------------------------------------------------------
def _conv_bn(cin: int, cout: int, kernel: int, relu: bool) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, 1, kernel // 2, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if relu:  # facexlib's LeakyReLU with slope 0 at 256 channels
        layers.append(nn.LeakyReLU(negative_slope=0.0))
    return nn.Sequential(*layers)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet50Body(nn.Module):
    """ResNet-50 up to ``layer4``; ``forward`` returns layers 2, 3 and 4."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        for i, (blocks, width, stride) in enumerate(
            ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)), start=1
        ):
            layer = [Bottleneck(cin, width, stride)]
            cin = width * Bottleneck.expansion
            layer.extend(Bottleneck(cin, width, 1) for _ in range(blocks - 1))
            setattr(self, f"layer{i}", nn.Sequential(*layer))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        c2 = self.layer2(self.layer1(x))
        c3 = self.layer3(c2)
        return [c2, c3, self.layer4(c3)]


class FPN(nn.Module):
    def __init__(self, channels: Sequence[int], out: int):
        super().__init__()
        self.output1 = _conv_bn(channels[0], out, 1, True)
        self.output2 = _conv_bn(channels[1], out, 1, True)
        self.output3 = _conv_bn(channels[2], out, 1, True)
        self.merge1 = _conv_bn(out, out, 3, True)
        self.merge2 = _conv_bn(out, out, 3, True)

    def forward(self, feats: list[torch.Tensor]) -> list[torch.Tensor]:
        o1, o2, o3 = self.output1(feats[0]), self.output2(feats[1]), self.output3(feats[2])
        o2 = self.merge2(o2 + F.interpolate(o3, size=o2.shape[2:], mode="nearest"))
        o1 = self.merge1(o1 + F.interpolate(o2, size=o1.shape[2:], mode="nearest"))
        return [o1, o2, o3]


class SSH(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv3X3 = _conv_bn(cin, cout // 2, 3, False)
        self.conv5X5_1 = _conv_bn(cin, cout // 4, 3, True)
        self.conv5X5_2 = _conv_bn(cout // 4, cout // 4, 3, False)
        self.conv7X7_2 = _conv_bn(cout // 4, cout // 4, 3, True)
        self.conv7x7_3 = _conv_bn(cout // 4, cout // 4, 3, False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mid = self.conv5X5_1(x)
        seven = self.conv7x7_3(self.conv7X7_2(mid))
        return F.relu(torch.cat([self.conv3X3(x), self.conv5X5_2(mid), seven], dim=1))


class _Head(nn.Module):
    def __init__(self, cin: int, per_anchor: int, anchors: int = 2):
        super().__init__()
        self.per_anchor = per_anchor
        self.conv1x1 = nn.Conv2d(cin, anchors * per_anchor, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv1x1(x).permute(0, 2, 3, 1).contiguous()
        return out.view(out.shape[0], -1, self.per_anchor)


class RetinaFace(nn.Module):
    """facexlib's ``RetinaFace(network_name="resnet50")`` in test phase: ``forward`` returns
    (box offsets, class probabilities, landmark offsets) per prior."""

    def __init__(self) -> None:
        super().__init__()
        self.body = ResNet50Body()
        self.fpn = FPN((512, 1024, 2048), 256)
        self.ssh1, self.ssh2, self.ssh3 = SSH(256, 256), SSH(256, 256), SSH(256, 256)
        self.ClassHead = nn.ModuleList([_Head(256, 2) for _ in range(3)])
        self.BboxHead = nn.ModuleList([_Head(256, 4) for _ in range(3)])
        self.LandmarkHead = nn.ModuleList([_Head(256, 10) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        fpn = self.fpn(self.body(x))
        feats = [self.ssh1(fpn[0]), self.ssh2(fpn[1]), self.ssh3(fpn[2])]
        boxes = torch.cat([h(f) for h, f in zip(self.BboxHead, feats, strict=True)], dim=1)
        logits = torch.cat([h(f) for h, f in zip(self.ClassHead, feats, strict=True)], dim=1)
        marks = torch.cat([h(f) for h, f in zip(self.LandmarkHead, feats, strict=True)], dim=1)
        return boxes, F.softmax(logits, dim=-1), marks


def retinaface_state_dict(raw: Mapping[str, Any]) -> dict[str, Any]:
    """facexlib's loading: a ``module.`` prefix (a DataParallel checkpoint) is stripped."""
    return {(k[7:] if k.startswith("module.") else k): v for k, v in raw.items()}


def load_retinaface(path: str | None, device: str = "cpu") -> RetinaFace:
    """The network from facexlib's ``detection_Resnet50_Final.pth``, loaded strictly."""
    from omnistory_vistorybench.metrics._common import require_file, torch_load

    file = require_file(
        path,
        "the RetinaFace face detector (AdaFace and FaceNet alignment)",
        f"set retinaface_weights= to facexlib's {RETINAFACE_FILE}",
    )
    net = RetinaFace()
    try:
        net.load_state_dict(retinaface_state_dict(torch_load(file)), strict=True)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ComponentError(
            f"skipped: {file} does not fit RetinaFace-ResNet50: {type(exc).__name__}: {first}",
            "model_error",
        ) from exc
    return net.eval().to(device)


# -- detection ----------------------------------------------------------------------------------
def priors(height: int, width: int) -> np.ndarray:
    """``PriorBox``: ``(n, 4)`` float32 ``(cx, cy, w, h)`` relative to the image, per stride,
    row-major cells, the two min sizes of a cell in turn."""
    rows = []
    for sizes, step in zip(MIN_SIZES, STEPS, strict=True):
        fh, fw = math.ceil(height / step), math.ceil(width / step)
        for i in range(fh):
            for j in range(fw):
                for size in sizes:
                    rows.append(
                        ((j + 0.5) * step / width, (i + 0.5) * step / height)
                        + (size / width, size / height)
                    )
    return np.asarray(rows, dtype=np.float32).reshape(-1, 4)


def decode(loc: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """Box offsets to ``(x1, y1, x2, y2)`` relative corners."""
    centre = prior[:, :2] + loc[:, :2] * VARIANCES[0] * prior[:, 2:]
    size = prior[:, 2:] * np.exp(loc[:, 2:] * VARIANCES[1])
    corner = centre - size / 2
    # (x2, y2) as the corner plus the size, in facexlib's order of float operations
    return np.concatenate([corner, corner + size], axis=1)


def decode_landmarks(pre: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """Landmark offsets to 5 relative ``(x, y)`` points, flattened to 10 columns."""
    points = prior[:, None, :2] + pre.reshape(-1, 5, 2) * VARIANCES[0] * prior[:, None, 2:]
    return points.reshape(-1, 10)


def nms(boxes: np.ndarray, scores: np.ndarray, threshold: float) -> list[int]:
    """torchvision's ``nms``: by decreasing score (ties: the earlier box first), a box whose IoU
    with a kept one exceeds ``threshold`` is dropped."""
    x1, y1, x2, y2 = (boxes[:, i].astype(np.float32) for i in range(4))
    areas = (x2 - x1) * (y2 - y1)
    order = np.argsort(-scores.astype(np.float32), kind="stable")
    keep: list[int] = []
    while order.size:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        w = np.clip(np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]), 0, None)
        h = np.clip(np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]), 0, None)
        inter = w * h
        iou = inter / (areas[i] + areas[rest] - inter)
        order = rest[~(iou > threshold)]
    return keep


def detect_faces(
    net: RetinaFace,
    bgr: np.ndarray,
    conf_threshold: float = CONF_THRESHOLD,
    nms_threshold: float = NMS_THRESHOLD,
) -> np.ndarray:
    """``(n, 15)`` rows ``(x1, y1, x2, y2, score, 5 x (x, y))`` in pixels, by decreasing score."""
    height, width = bgr.shape[:2]
    device = next(net.parameters()).device
    image = torch.from_numpy(bgr.astype(np.float32).transpose(2, 0, 1).copy())[None]
    image = image - torch.tensor(MEAN_BGR, dtype=torch.float32).view(1, 3, 1, 1)
    with torch.no_grad():
        loc, conf, marks = net(image.to(device))
    prior = priors(height, width)
    scale = np.array([width, height] * 2, dtype=np.float32)
    boxes = decode(loc[0].cpu().numpy(), prior) * scale
    landmarks = decode_landmarks(marks[0].cpu().numpy(), prior) * np.tile(scale[:2], 5)
    scores = conf[0, :, 1].cpu().numpy()
    chosen = np.where(scores > conf_threshold)[0]
    boxes, landmarks, scores = boxes[chosen], landmarks[chosen], scores[chosen]
    order = np.argsort(scores, kind="stable")[::-1]
    dets = np.hstack([boxes[order], scores[order, None]]).astype(np.float32)
    landmarks = landmarks[order]
    keep = nms(dets[:, :4], dets[:, 4], nms_threshold)
    return np.concatenate([dets[keep], landmarks[keep]], axis=1).astype(np.float32)


def face_template(face_size: int = FACE_SIZE) -> np.ndarray:
    """The FFHQ template scaled to ``face_size`` (crop ratio 1)."""
    return FFHQ_TEMPLATE_512 * (face_size / 512.0)


def warp_face(bgr: np.ndarray, landmarks: np.ndarray, face_size: int = FACE_SIZE) -> Any:
    """``align_warp_face`` for one face: ``(face_size, face_size, 3)`` uint8 BGR, or None when
    OpenCV finds no transform."""
    import cv2

    matrix = cv2.estimateAffinePartial2D(
        np.asarray(landmarks, np.float32).reshape(5, 2),
        face_template(face_size).astype(np.float32),
        method=cv2.LMEDS,
    )[0]
    if matrix is None:
        return None
    return cv2.warpAffine(
        bgr,
        matrix,
        (face_size, face_size),
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=BORDER_BGR,
    )


class FaceRestoreAligner:
    """``aligned(bgr)``: the first face RetinaFace finds, warped to 112x112, or None."""

    def __init__(self, net: RetinaFace, face_size: int = FACE_SIZE):
        self.net = net
        self.face_size = face_size

    def aligned(self, bgr: np.ndarray) -> Any:
        faces = detect_faces(self.net, bgr)
        if not len(faces):
            return None
        return warp_face(bgr, faces[0, 5:15], self.face_size)


__all__ = [
    "FACE_SIZE",
    "FFHQ_TEMPLATE_512",
    "FaceRestoreAligner",
    "RETINAFACE_FILE",
    "RetinaFace",
    "decode",
    "decode_landmarks",
    "detect_faces",
    "face_template",
    "load_retinaface",
    "nms",
    "priors",
    "retinaface_state_dict",
    "warp_face",
]
