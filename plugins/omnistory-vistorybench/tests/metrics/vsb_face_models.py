"""Tiny face detectors built by the tests, loaded by the metric's own loading code.

* :func:`build_scrfd` -- an ONNX graph with SCRFD's signature (one ``(1, 3, H, W)`` input, nine
  outputs: scores, distances and keypoints at strides 8, 16, 32, two anchors a cell), batched or
  not, with a fixed or a free input size.  ``outputs=`` gives constant outputs (decoding checks);
  otherwise a cell's score is ``sigmoid(GAIN * (mean grey of the cell - CUT))`` on the normalised
  input, so a bright patch is a face and a dark crop has none at any threshold the official tries.
* :func:`retinaface_state` -- a state dict of the RetinaFace port whose ResNet-50 body, FPN and
  SSH carry the local brightness forward (channel-averaging convolutions, identity batch norms,
  residual branches off) and whose class head makes a bright region a face; box and landmark
  heads are constant offsets around each prior.  Saved with facexlib's ``module.`` prefix.
* :func:`draw_face` -- a bright face-like patch with five dark dots on a dark background.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

STRIDES = (8, 16, 32)
ANCHORS = 2
#: brightness score of the tiny SCRFD: on (x - 127.5) / 128, grey 0.3 is the 50% point
GAIN, CUT = 12.0, 0.3
#: the tiny SCRFD's box and keypoint distances (in strides) around an anchor centre
BOX = np.array([2.5, 2.5, 2.5, 2.5], np.float32)
KPS = np.array([-1.2, -0.8, 1.2, -0.8, 0.0, 0.2, -1.0, 1.2, 1.0, 1.2], np.float32)
#: per-stride logit bonus, so that a face is found at the coarsest stride (a face-sized box)
LEVEL_BONUS = {8: -1.0, 16: 0.0, 32: 1.0}


def _graph_outputs(helper: Any, names: list[str], batched: bool) -> list[Any]:
    from onnx import TensorProto

    out = []
    for name in names:
        width = 1 if name.startswith("score") else 4 if name.startswith("bbox") else 10
        shape = [1, "n", width] if batched else ["n", width]
        out.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
    return out


def build_scrfd(
    path: Path,
    *,
    size: int | None = None,
    batched: bool = False,
    outputs: dict[str, np.ndarray] | None = None,
) -> Path:
    """A tiny SCRFD at ``path``; ``size``: a fixed square input (None: free, 640 is used);
    ``outputs``: constant ``score_<s>``, ``bbox_<s>``, ``kps_<s>`` arrays (rows per anchor)
    instead of the brightness scores."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    names = [f"{kind}_{s}" for kind in ("score", "bbox", "kps") for s in STRIDES]
    inits: list[Any] = [
        numpy_helper.from_array(np.array([0], np.int64), "axis0"),
        numpy_helper.from_array(np.array([-1, 1], np.int64), "rows1"),
        numpy_helper.from_array(np.array([-1, 4], np.int64), "rows4"),
        numpy_helper.from_array(np.array([-1, 10], np.int64), "rows10"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(GAIN, np.float32), "gain"),
        numpy_helper.from_array(np.array(CUT, np.float32), "cut"),
        numpy_helper.from_array(BOX.reshape(1, 4, 1, 1), "box"),
        numpy_helper.from_array(KPS.reshape(1, 10, 1, 1), "kps"),
    ]
    nodes = [helper.make_node("ReduceMean", ["input.1"], ["grey"], axes=[1], keepdims=1)]
    nodes.append(helper.make_node("ReduceMean", ["input.1"], ["all"], keepdims=0))
    nodes.append(helper.make_node("Mul", ["all", "zero"], ["nothing"]))
    for stride in STRIDES:
        rows = {"score": "rows1", "bbox": "rows4", "kps": "rows10"}
        if outputs is not None:
            for kind in ("score", "bbox", "kps"):
                name = f"{kind}_{stride}"
                inits.append(numpy_helper.from_array(outputs[name].astype(np.float32), f"c_{name}"))
                raw = f"{name}_raw"
                nodes.append(helper.make_node("Add", [f"c_{name}", "nothing"], [raw]))
                _shape(helper, nodes, raw, name, rows[kind], batched)
            continue
        pooled = f"pool_{stride}"
        bonus = np.array(LEVEL_BONUS[stride], np.float32)
        inits.append(numpy_helper.from_array(bonus, f"bonus_{stride}"))
        nodes.append(
            helper.make_node(
                "AveragePool", ["grey"], [pooled], kernel_shape=[stride] * 2, strides=[stride] * 2
            )
        )
        nodes += [
            helper.make_node("Sub", [pooled, "cut"], [f"d_{stride}"]),
            helper.make_node("Mul", [f"d_{stride}", "gain"], [f"g_{stride}"]),
            helper.make_node("Add", [f"g_{stride}", f"bonus_{stride}"], [f"l_{stride}"]),
            helper.make_node("Sigmoid", [f"l_{stride}"], [f"s_{stride}"]),
            helper.make_node("Mul", [pooled, "zero"], [f"z_{stride}"]),
            helper.make_node("Add", [f"z_{stride}", "box"], [f"b_{stride}"]),
            helper.make_node("Add", [f"z_{stride}", "kps"], [f"k_{stride}"]),
        ]
        for kind, source in (("score", "s"), ("bbox", "b"), ("kps", "k")):
            # (1, c, h, w) -> (1, h, w, c), each cell's values twice (two anchors) -> rows
            cells, pair = f"{kind}_{stride}_cells", f"{kind}_{stride}_pair"
            nodes.append(
                helper.make_node("Transpose", [f"{source}_{stride}"], [cells], perm=[0, 2, 3, 1])
            )
            nodes.append(helper.make_node("Concat", [cells, cells], [pair], axis=3))
            _shape(helper, nodes, pair, f"{kind}_{stride}", rows[kind], batched)
    side: Any = size if size is not None else "h"
    graph = helper.make_graph(
        nodes,
        "tiny_scrfd",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, side, side])],
        _graph_outputs(helper, names, batched),
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _shape(helper: Any, nodes: list[Any], source: str, name: str, rows: str, batched: bool) -> None:
    if not batched:
        nodes.append(helper.make_node("Reshape", [source, rows], [name]))
        return
    nodes.append(helper.make_node("Reshape", [source, rows], [f"{name}_rows"]))
    nodes.append(helper.make_node("Unsqueeze", [f"{name}_rows", "axis0"], [name]))


# -- RetinaFace ---------------------------------------------------------------------------------
#: class-head logit of a face: RF_GAIN * (carried brightness) + RF_BIAS
RF_GAIN, RF_BIAS = 0.03, -4.0
#: landmark offsets (in 0.1 prior sizes) of the five points around a prior centre
RF_MARKS = np.array([-3.0, -2.0, 3.0, -2.0, 0.0, 0.5, -2.5, 3.0, 2.5, 3.0], np.float32)


def retinaface_state(*, prefix: str = "module.") -> dict[str, Any]:
    """The constructed weights (see the module docstring), keys as facexlib saves them."""
    import torch
    from omnistory_vistorybench.metrics._retinaface import RetinaFace

    net = RetinaFace()
    state = {}
    for name, value in net.state_dict().items():
        tensor = torch.zeros_like(value)
        if name.endswith("running_var") or (name.endswith(".weight") and value.dim() == 1):
            tensor = torch.ones_like(value)  # batch norms are identities
        state[name] = tensor

    def average(name: str, centre_only: bool = False) -> None:
        weight = state[name]
        cin = weight.shape[1]
        if centre_only:
            k = weight.shape[2] // 2
            weight[:, :, k, k] = 1.0 / cin
        else:
            weight[:] = 1.0 / (cin * weight.shape[2] * weight.shape[3])

    average("body.conv1.weight")
    for name in list(state):
        if ".downsample.0.weight" in name:
            average(name)
    for i in (1, 2, 3):
        average(f"fpn.output{i}.0.weight")
        average(f"ssh{i}.conv3X3.0.weight", centre_only=True)
    for i in (1, 2):
        average(f"fpn.merge{i}.0.weight", centre_only=True)
    for i in range(3):
        cls = state[f"ClassHead.{i}.conv1x1.weight"]
        for anchor in range(ANCHORS):
            # the face logit reads the carried value; the two anchors of a cell differ
            cls[2 * anchor + 1, :128] = RF_GAIN * (1.0 - 0.1 * anchor) / 128
        state[f"ClassHead.{i}.conv1x1.bias"][1::2] = RF_BIAS
        state[f"LandmarkHead.{i}.conv1x1.bias"][:] = torch.from_numpy(np.tile(RF_MARKS, ANCHORS))
    return {f"{prefix}{k}": v for k, v in state.items()}


def save_retinaface(path: Path) -> Path:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(retinaface_state(), path)
    return path


# -- drawn faces --------------------------------------------------------------------------------
def draw_face(
    width: int,
    height: int,
    box: tuple[int, int, int, int] | None,
    tint: tuple[int, int, int] = (240, 230, 220),
    seed: int = 0,
) -> np.ndarray:
    """A dark ``(height, width, 3)`` RGB image with, in ``box`` (x1, y1, x2, y2), a bright patch
    (``tint`` plus a little texture) bearing two eyes, a nose and a mouth; no ``box``: no face."""
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 25, (height, width, 3)).astype(np.float64)
    if box is not None:
        x1, y1, x2, y2 = box
        patch = np.asarray(tint, np.float64) + rng.normal(0, 6, (y2 - y1, x2 - x1, 3))
        image[y1:y2, x1:x2] = patch
        w, h = x2 - x1, y2 - y1
        for fx, fy, r in ((0.32, 0.4, 0.06), (0.68, 0.4, 0.06), (0.5, 0.6, 0.04), (0.5, 0.8, 0.07)):
            cx, cy, rad = x1 + fx * w, y1 + fy * h, max(1.0, r * w)
            ys, xs = np.ogrid[:height, :width]
            image[(xs - cx) ** 2 + (ys - cy) ** 2 <= rad**2] = (60, 40, 40)
    return np.clip(image, 0, 255).astype(np.uint8)


__all__ = [
    "BOX",
    "CUT",
    "GAIN",
    "KPS",
    "RF_BIAS",
    "RF_GAIN",
    "RF_MARKS",
    "STRIDES",
    "build_scrfd",
    "draw_face",
    "retinaface_state",
    "save_retinaface",
]
