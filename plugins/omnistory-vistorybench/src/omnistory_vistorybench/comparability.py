"""Whether our leaderboard rows were scored with the official metric settings, so that they can be
read beside the published ones.

A row (a method's chosen mode on a split) is ``official settings`` when each of the five
evaluators of the task scored its runs, and each did so as the official code would: a real
evaluator (not a stand-in: the test kit's, a demo's), every output parameter at its declared
default (the official value: thresholds, judge model ``gpt-4.1``, ``faithful``, the network
sizes), the single-character-action judge set (``metric.cids.judge_base_url``: the published
tables have that column), and each checkpoint the official one by name (:data:`OFFICIAL_WEIGHTS`:
the hub id, or a file or folder named as the official download names it).  Otherwise the row is
``not comparable`` and says why.  A checkpoint's *content* cannot be checked against the
official one here (no published digests); its fingerprint is in ``evaluators.json`` for anyone
who can.  The ports' own departures (``metrics.math.DEPARTURES``: GroundingDINO through
transformers, no face alignment) are not settings: the report states them beside the table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: what ``evaluate`` writes beside the scores (``omnistory_eval.run_info``)
EVALUATORS_FILE = "evaluators.json"
#: the evaluators a comparable row has been scored by (the task's ``EVALUATORS``)
TASK_EVALUATORS: tuple[str, ...] = ("cids", "csd", "prompt_align", "aesthetic", "diversity")
OFFICIAL = "official settings"
NOT_COMPARABLE = "not comparable"
PUBLISHED = "published"
#: evaluator -> weights parameter -> the accepted values: the official hub id (or None: the
#: metric's default download) and the official file or folder name
OFFICIAL_WEIGHTS: dict[str, dict[str, tuple[Any, ...]]] = {
    "cids": {
        "detector_checkpoint": (None, "IDEA-Research/grounding-dino-tiny", "grounding-dino-tiny"),
        "clip_model": ("openai/clip-vit-large-patch14", "clip-vit-large-patch14"),
        "arcface_weights": ("glintr100.onnx",),
        "facenet_weights": ("20180402-114759-vggface2.pt",),
        "adaface_weights": ("adaface_ir101_webface12m.ckpt",),
    },
    "csd": {"checkpoint": ("csd_vit-large.pth",)},
    "aesthetic": {
        "encoder": ("google/siglip-so400m-patch14-384", "siglip-so400m-patch14-384"),
        "head": ("aesthetic_predictor_v2_5.pth",),
    },
    "diversity": {"checkpoint": (None, "inception_v3_google-0cc3c7bd.pth")},
    "prompt_align": {},
}
#: output parameters that are not settings of the score (endpoints; the rubric's digest, which
#: the rubric folder decides)
NOT_SETTINGS: frozenset[str] = frozenset(
    {"base_url", "judge_base_url", "single_character_rubric_sha256", "rubric_sha256", "seed"}
)


def read_evaluators(*folders: Path | None) -> dict[str, dict[str, Any]]:
    """``evaluators.json`` of the first of ``folders`` that has one (evaluator key -> info)."""
    for folder in folders:
        if folder is None:
            continue
        try:
            data = json.loads((Path(folder) / EVALUATORS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return {str(k): v for k, v in data.items() if isinstance(v, dict)}
    return {}


def declared_defaults() -> dict[str, dict[str, Any]]:
    """evaluator name -> its declared non-runtime parameters' defaults (the official values)."""
    from omnistory_vistorybench.metrics import metric_classes

    out: dict[str, dict[str, Any]] = {}
    for cls in metric_classes():
        out[cls.name] = {
            p.name: p.default for p in cls.parameters or () if not p.runtime and not p.weights
        }
    return out


def _named(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).rstrip("/\\")
    return text


def weights_departures(name: str, params: Mapping[str, Any]) -> list[str]:
    """The checkpoints of evaluator ``name`` that are not the official ones by name."""
    out = []
    for param, accepted in OFFICIAL_WEIGHTS.get(name, {}).items():
        value = _named(params.get(param))
        if value is None:
            if None in accepted or param.endswith("_weights"):
                continue  # the default download; an unset face model is an error row instead
            out.append(f"{name}.{param} is not set")
            continue
        base = Path(value).name
        if value not in accepted and base not in accepted:
            out.append(f"{name}.{param}={base} (official: {_official_name(accepted)})")
    return out


def _official_name(accepted: tuple[Any, ...]) -> str:
    return next(str(a) for a in reversed(accepted) if a is not None)


def evaluator_departures(
    name: str, info: Mapping[str, Any] | None, defaults: Mapping[str, Any]
) -> list[str]:
    """Why evaluator ``name`` as ``info`` (its ``evaluators.json`` entry) did not score with the
    official settings; [] when it did."""
    if info is None:
        return [f"{name}: its settings were not recorded (score it again with evaluate)"]
    if info.get("stand_in"):
        return [f"{name}: a stand-in, not the metric"]
    params = dict(info.get("params") or {})
    found = []
    for key, default in defaults.items():
        if key in NOT_SETTINGS or key not in params:
            continue
        if params[key] != default:
            found.append(f"{name}.{key}={params[key]} (official: {default})")
    if name == "cids" and not params.get("judge_base_url"):
        found.append("cids: no single-character-action judge (judge_base_url unset)")
    found.extend(weights_departures(name, params))
    return found


def settings_of(
    systems: Iterable[str],
    used: Mapping[str, set[str]],
    evaluators: Mapping[str, Mapping[str, Any]],
    defaults: Mapping[str, Mapping[str, Any]],
) -> str:
    """``official settings``, or ``not comparable: <reasons>``, for a row made of ``systems``
    (``used``: system -> the evaluator keys that gave it ``ok`` rows)."""
    keys = set().union(*(used.get(s, set()) for s in systems))
    reasons: list[str] = []
    for name in TASK_EVALUATORS:
        key = f"metric/{name}"
        if key not in keys:
            standing = [
                k for k in sorted(keys) if (evaluators.get(k) or {}).get("stands_in_for") == name
            ]
            reasons.extend(
                [f"{name}: scored by the stand-in {k}" for k in standing] or [f"{name} not scored"]
            )
            continue
        reasons.extend(evaluator_departures(name, evaluators.get(key), defaults.get(name, {})))
    if not reasons:
        return OFFICIAL
    return f"{NOT_COMPARABLE}: " + "; ".join(dict.fromkeys(reasons))


__all__ = [
    "EVALUATORS_FILE",
    "NOT_COMPARABLE",
    "OFFICIAL",
    "OFFICIAL_WEIGHTS",
    "PUBLISHED",
    "TASK_EVALUATORS",
    "declared_defaults",
    "evaluator_departures",
    "read_evaluators",
    "settings_of",
    "weights_departures",
]
