"""A first ViStoryBench score offline: ``python -m omnistory_core -m suite=vistory_demo``.

The suite generates the bundled fixture's systems and scores them end to end with every metric
of the task, without a download: the checkpoints are tiny random networks this module builds
(deterministically, from a seed) through the same loading paths as the official ones, and the
prompt-alignment judge is a local stand-in (:class:`PromptAlignStandIn`).  The numbers mean
nothing about the systems; they exist so that a newcomer sees the pipeline, the leaderboard and
the report fill in before spending GPU hours, and every row says ``not comparable``.

:func:`demo_weights` builds (once per folder; a stamp file records the seed and what was built)

* CIDS: a GroundingDINO (transformers' port, Swin 8-dim, BERT 32-dim), a CLIP (32-dim vision),
  and a glintr100-shaped ArcFace ONNX graph for ``realistic_human`` characters (scored with
  ``face_encoder=arcface``, the official single-model alternative, with
  ``face_alignment=whole_crop``: the official crop needs SCRFD's pack file and OpenCV);
* CSD: a 2-layer, 32-wide CSD style network (``csd_vit-tiny.pth``);
* aesthetics: a SigLIP vision tower (32-dim, 378 px) and a head sized to it;
* Inception Score: torchvision's Inception v3 architecture (fixed; ~27M parameters) with random
  weights;

and :func:`demo_overrides` gives the ``metric.*`` settings that point the metrics at them
(``${vistory_demo_overrides:DIR}`` in ``conf/suite/vistory_demo.yaml``).  Needs the ``metrics``
extra (torch, transformers, onnx, onnxruntime).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from omnistory_core.api import EvalResult, Metric, Param
from omnistory_vistorybench.offline import (
    CSD_TINY,
    build_aesthetic_head,
    build_clip,
    build_csd,
    build_grounding_dino,
    build_inception,
    build_siglip,
)

#: what the stamp of a built folder records (a change rebuilds)
BUILD_VERSION = 2
STAMP = "built.json"
ARCFACE_PATCH = 16


def demo_weights(root: str | Path, seed: int = 0) -> dict[str, str]:
    """Build the tiny checkpoints into ``root`` (skipped when a stamp of the same seed and build
    version is there) and return what each metric parameter should point at."""
    root = Path(root).expanduser().resolve()
    paths = {
        "detector": root / "grounding-dino-demo",
        "clip": root / "clip-demo",
        "arcface": root / "arcface-demo.onnx",
        "csd": root / "csd_vit-tiny.pth",
        "siglip": root / "siglip-demo",
        "head": root / "aesthetic-head-demo.pth",
        "inception": root / "inception_v3-demo.pth",
    }
    stamp = root / STAMP
    want = {"version": BUILD_VERSION, "seed": seed}
    try:
        built = json.loads(stamp.read_text(encoding="utf-8")) == want
    except (OSError, ValueError):
        built = False
    if not built or not all(p.exists() for p in paths.values()):
        root.mkdir(parents=True, exist_ok=True)
        build_grounding_dino(paths["detector"], seed)
        build_clip(paths["clip"], seed + 1)
        build_arcface(paths["arcface"], seed + 2)
        build_csd(paths["csd"], seed + 3)
        build_siglip(paths["siglip"], seed + 4)
        build_aesthetic_head(paths["head"], 32, seed + 5)
        build_inception(paths["inception"], seed + 6)
        stamp.write_text(json.dumps(want), encoding="utf-8")
    return {name: str(path) for name, path in paths.items()}


def demo_overrides(root: str | Path, seed: int = 0) -> list[str]:
    """The ``metric.*`` settings of the demo's evaluation, its checkpoints built first."""
    w = demo_weights(root, seed)
    csd = [f"metric.csd.{k}={v}" for k, v in CSD_TINY.items()]
    return [
        f"metric.cids.detector_checkpoint={w['detector']}",
        f"metric.cids.clip_model={w['clip']}",
        "metric.cids.face_encoder=arcface",
        f"metric.cids.arcface_weights={w['arcface']}",
        # the official face crop needs SCRFD's pack file and OpenCV's warp (the metrics extra);
        # the demo's random ArcFace scores the detector's whole box, a documented departure
        "metric.cids.face_alignment=whole_crop",
        "metric.cids.device=cpu",
        f"metric.csd.checkpoint={w['csd']}",
        "metric.csd.device=cpu",
        *csd,
        f"metric.aesthetic.encoder={w['siglip']}",
        f"metric.aesthetic.head={w['head']}",
        "metric.aesthetic.device=cpu",
        f"metric.diversity.checkpoint={w['inception']}",
        "metric.diversity.device=cpu",
        "metric.diversity.backend=builtin",
    ]


# -- ArcFace's stand-in (the other checkpoints: omnistory_vistorybench.offline) ------------------


def build_arcface(path: Path, seed: int = 0) -> Path:
    """An ONNX graph with glintr100's signature (input ``input.1`` (N, 3, 112, 112), a (N, 512)
    output): Conv(16x16, stride 16) -> Flatten -> MatMul, random."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    channels, side = 4, 112 // ARCFACE_PATCH
    kernel = rng.normal(0, 0.05, (channels, 3, ARCFACE_PATCH, ARCFACE_PATCH)).astype(np.float32)
    bias = rng.normal(0, 0.1, channels).astype(np.float32)
    project = rng.normal(0, 0.1, (channels * side * side, 512)).astype(np.float32)
    nodes = [
        helper.make_node(
            "Conv",
            ["input.1", "conv.weight", "conv.bias"],
            ["features"],
            kernel_shape=[ARCFACE_PATCH, ARCFACE_PATCH],
            strides=[ARCFACE_PATCH, ARCFACE_PATCH],
        ),
        helper.make_node("Flatten", ["features"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "fc.weight"], ["683"]),
    ]
    graph = helper.make_graph(
        nodes,
        "demo_glintr",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["None", 3, 112, 112])],
        [helper.make_tensor_value_info("683", TensorProto.FLOAT, ["None", 512])],
        [
            numpy_helper.from_array(kernel, "conv.weight"),
            numpy_helper.from_array(bias, "conv.bias"),
            numpy_helper.from_array(project, "fc.weight"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


# -- the stand-in judge -------------------------------------------------------------------------


class PromptAlignStandIn(Metric):
    """A local stand-in for the prompt-alignment judge (``metric=prompt_align_standin``): the
    same inputs, criteria (``scene``, ``camera``, ``character_action``) and 0-4 integer scale
    as ``prompt_align``, answered without any model or network from a digest of the shot's image
    and text, so that the leaderboard's prompt category fills in offline.  Not a judgement of
    anything; marked ``stand_in`` (every row it scores is not comparable)."""

    name = "prompt_align_standin"
    version = "1"
    track = "prompt"
    criteria = ("scene", "camera", "character_action")
    scope = "item"
    reads = ("candidate_image", "shot")
    score_range = (0.0, 4.0)
    stand_in = True
    #: the evaluator whose place it takes (the report's comparability check)
    stands_in_for = "prompt_align"
    description = "a local stand-in for the prompt-alignment judge (offline demo; not a score)"
    parameters = (Param("salt", str, "", "mixed into the digest (another stand-in's answers)"),)

    def run_one(self, item: dict[str, Any]) -> EvalResult:
        image = item["candidate_image"]
        # decoded, not only hashed: an image that does not decode is a failed row, never a score
        image.open_image()
        shot = json.dumps(item.get("shot") or {}, sort_keys=True, default=str)
        text = f"{self.params.get('salt', '')}|{image.sha256}|{shot}"
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        scores = {c: float(digest[n] % 5) for n, c in enumerate(self.criteria)}
        return EvalResult(scores, detail={"stand_in": True})


__all__ = [
    "PromptAlignStandIn",
    "build_arcface",
    "demo_overrides",
    "demo_weights",
]
