"""What the ``cids`` metric checks before the evaluation scores anything (its pre-flight), from
its parameters alone: the detector's and CLIP's checkpoints, the weights and detectors of the
face models its face encoder runs, and with a judge the rubric, the server and the key.

Each function takes the metric's parameters and its name (``metric.<name>.<param>`` in the
messages); :meth:`.cids.CIDSMetric.preflight_needs` returns :func:`preflight_needs`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omnistory_core.api import ComponentError
from omnistory_vistorybench.metrics.cids_scoring import FACE_TAG, LOOPBACK
from omnistory_vistorybench.metrics.clip_encoder import (
    OFFICIAL_CLIP,
)
from omnistory_vistorybench.metrics.face import (
    OFFICIAL_FACE_MODELS,
    scrfd_weights,
)
from omnistory_vistorybench.metrics.single_action import (
    read_rubric,
)


def looks_local(checkpoint: str) -> bool:
    """Whether a checkpoint names a folder on this machine rather than a hub id ``org/name``."""
    return checkpoint.startswith(("/", ".", "~")) or Path(checkpoint).exists()


def checkpoint_need(name: str, checkpoint: str, param: str) -> dict[str, str]:
    """A hub id: a ``weights`` need (local cache, then the hub); a local folder that is absent:
    a ``config`` problem naming the parameter (no hub lookup can find it)."""
    label = f"metric.{name}.{param}"
    if looks_local(checkpoint):
        path = Path(os.path.expanduser(checkpoint))
        if path.exists():
            return {"check": "weights", "target": str(path), "remedy": f"correct {label}"}
        return {
            "check": "config",
            "target": label,
            "detail": f"{path} does not exist",
            "remedy": f"--set {label}= to an HF checkpoint directory or hub id",
        }
    return {
        "check": "weights",
        "target": checkpoint,
        "remedy": f"run `python -m omnistory_core prefetch metric=cids` where the hub is"
        f" reachable (same HF_HOME), or --set {label}= to a local directory",
    }


def preflight_needs(params: Mapping[str, Any], name: str) -> list[dict[str, str]]:
    """What ``evaluate`` checks before scoring anything, from the parameters alone (which
    characters a story holds is unknown here): the detector's and CLIP's checkpoints; the
    face weights the face encoder's models name (a named file that is absent stops the
    evaluation; an unset one is a warning, since only ``realistic_human`` characters need
    it and their stories become ``error`` rows); with ``judge_base_url``, the rubric, the
    judge's server and, for a remote one, its key."""
    needs: list[dict[str, str]] = []
    if str(params.get("detector") or "groundingdino") == "groundingdino":
        from omnistory_vistorybench.metrics.grounding import OFFICIAL_GROUNDING_DINO

        checkpoint = str(params.get("detector_checkpoint") or OFFICIAL_GROUNDING_DINO)
        needs.append(checkpoint_need(name, checkpoint, "detector_checkpoint"))
    if str(params.get("object_encoder") or "clip") == "clip":
        checkpoint = str(params.get("clip_model") or OFFICIAL_CLIP)
        needs.append(checkpoint_need(name, checkpoint, "clip_model"))
    needs.extend(face_needs(params, name))
    needs.extend(judge_needs(params, name))
    return needs


def face_needs(params: Mapping[str, Any], name: str) -> list[dict[str, str]]:
    """The weights files of the face models the face encoder runs."""
    from omnistory_vistorybench.metrics.face import FACE_MODELS, face_model_names

    encoder = str(params.get("face_encoder") or "face_mix")
    if encoder == "arcface":
        models = ["arcface"]
    elif encoder == "face_mix":
        models = face_model_names(params.get("face_models", OFFICIAL_FACE_MODELS))
    else:  # a registered encoder of its own: it says what it lacks when built
        return []
    needs: list[dict[str, str]] = []
    if str(params.get("face_alignment") or "official") == "official":
        needs.extend(detector_needs(params, name, models))
    for model in models:
        if model not in FACE_MODELS:
            continue  # an unknown name: build_face_mix names the known ones per story
        param = FACE_MODELS[model][1]
        value = params.get(param)
        label = f"metric.{name}.{param}"
        if not value:
            needs.append(
                {
                    "check": "config",
                    "target": label,
                    "detail": f"not set: the {model} face model has no weights",
                    "remedy": f"--set {label}=PATH, or --set metric.{name}.face_models="
                    " listing the face models you have",
                    "warning": f"stories with {FACE_TAG} characters get 'error' rows",
                }
            )
            continue
        path = Path(os.path.expanduser(str(value)))
        if not path.exists():
            needs.append(
                {
                    "check": "config",
                    "target": label,
                    "detail": f"{path} does not exist",
                    "remedy": f"--set {label}= to the {model} weights file",
                }
            )
        if model == "arcface":  # the official glintr100.onnx runs on onnxruntime
            needs.append(
                {
                    "check": "package",
                    "target": "onnxruntime",
                    "remedy": "pip install onnxruntime (or onnxruntime-gpu)",
                }
            )
    return needs


def detector_needs(params: Mapping[str, Any], name: str, models: list[str]) -> list[dict[str, str]]:
    """The face detectors of the official alignment: SCRFD for ArcFace, RetinaFace for
    AdaFace and FaceNet (an unset one only warns, like the face weights)."""
    wanted = []
    if "arcface" in models:
        wanted.append(("scrfd_weights", scrfd_weights(params), "ArcFace's SCRFD"))
    if any(m in models for m in ("adaface", "facenet")):
        value = params.get("retinaface_weights")
        wanted.append(("retinaface_weights", value, "AdaFace's and FaceNet's RetinaFace"))
    needs: list[dict[str, str]] = []
    if wanted:  # both alignments warp with OpenCV, as insightface and facexlib do
        needs.append(
            {
                "check": "package",
                "target": "cv2",
                "remedy": "pip install opencv-python-headless (the metrics extra has it)",
            }
        )
    for param, value, what in wanted:
        label = f"metric.{name}.{param}"
        if not value:
            needs.append(
                {
                    "check": "config",
                    "target": label,
                    "detail": f"not set: {what} face detector has no weights",
                    "remedy": f"--set {label}=PATH, or --set metric.{name}"
                    ".face_alignment=whole_crop (a documented departure)",
                    "warning": f"stories with {FACE_TAG} characters get 'error' rows",
                }
            )
        elif not Path(os.path.expanduser(str(value))).exists():
            needs.append(
                {
                    "check": "config",
                    "target": label,
                    "detail": f"{Path(os.path.expanduser(str(value)))} does not exist",
                    "remedy": f"--set {label}= to {what} weights file",
                }
            )
    return needs


def judge_needs(params: Mapping[str, Any], name: str) -> list[dict[str, str]]:
    """With ``judge_base_url``: the single-character rubric, the server, the key."""
    from urllib.parse import urlparse

    from omnistory_vistorybench.metrics.alignment_judge import chat_base_url

    base_url = chat_base_url(params.get("judge_base_url"))
    if not base_url:
        return []  # single_character_action is not produced: no judge to reach
    prefix = f"metric.{name}"
    needs: list[dict[str, str]] = []
    try:
        read_rubric(params.get("rubric_dir"))
    except ComponentError as exc:
        needs.append(
            {
                "check": "config",
                "target": f"{prefix}.rubric_dir",
                "remedy": f"--set {prefix}.rubric_dir=<ViStoryBench checkout>"
                f"/vistorybench/bench/prompt_align/user_prompts (or {prefix}.judge_base_url"
                "=null to leave single_character_action out)",
                "detail": str(exc).removeprefix("skipped: ").split(";")[0],
            }
        )
    needs.append(
        {
            "check": "server",
            "target": base_url,
            "remedy": f"start the judge's server or correct {prefix}.judge_base_url",
        }
    )
    env = str(params.get("judge_api_key_env") or "")
    if env and urlparse(base_url).hostname not in LOOPBACK:  # a local server needs no key
        needs.append(
            {
                "check": "key",
                "target": env,
                "remedy": f"export {env}=<key> ({prefix}.judge_api_key_env)",
            }
        )
    return needs


__all__ = [
    "checkpoint_need",
    "detector_needs",
    "face_needs",
    "judge_needs",
    "looks_local",
    "preflight_needs",
]
