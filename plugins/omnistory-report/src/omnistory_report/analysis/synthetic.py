"""Synthetic scores tables with the full row set, for benchmarks, demos and report tests.

Not a model of real systems: scores follow a latent per-system quality so that the report has
structure to show (rankings, correlations, failures), and every status of the contract occurs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from omnistory_eval.judges.rubric import CRITERIA

from omnistory_core.scores import COLUMNS
from omnistory_report.analysis.frame import _normalise

# The paper's rubric keys (Appendix E.4), four per judge track: one definition, the judges'.
RUBRICS: dict[str, tuple[str, ...]] = CRITERIA
SPEECH_FIELDS = ("emotion", "speed", "pitch", "gender")
PAPER_JUDGES: dict[str, tuple[str, ...]] = {
    "text": ("text-qwen3-30b-a3b", "text-seed-oss-36b", "text-llama-nemotron-49b"),
    "image": ("image-qwen3-vl-32b", "image-internvl35-38b", "image-exaone45-33b"),
    "speech": ("speech-audio-flamingo-next", "speech-moss-audio-8b", "speech-kimi-audio-7b"),
    "omni": ("omni-qwen3-omni-30b", "omni-nemotron3-nano-omni", "omni-gemma4-12b"),
}


def synthetic_scores(
    n_systems: int = 32,
    n_examples: int = 900,
    judges_per_track: int = 3,
    seed: int = 0,
    invalid_rate: float = 0.01,
) -> pd.DataFrame:
    """A complete scores table: every (system, example) has its 6 metric rows and 16·J judge rows.

    The first three judges of a track carry the paper's judge ids (panels A, B, C of F.6).

    Every fourth system has plan failures (all three outputs missing for 5–20% of examples) and
    every fifth also misses some speech; ``invalid_rate`` of judge records have an invalid
    criterion.
    """
    rng = np.random.default_rng(seed)
    systems = np.array([f"sys{s:02d}" for s in range(n_systems)])
    examples = np.array([f"ex{i:04d}" for i in range(n_examples)])
    quality = rng.uniform(0.2, 0.9, size=n_systems)
    modal_q = np.clip(quality[:, None] + rng.normal(0, 0.08, (n_systems, 3)), 0, 1)
    omni_q = modal_q.mean(axis=1)

    fail_rate = np.where(np.arange(n_systems) % 4 == 3, rng.uniform(0.05, 0.2, n_systems), 0.0)
    plan_fail = rng.random((n_systems, n_examples)) < fail_rate[:, None]
    speech_only = (np.arange(n_systems) % 5 == 4)[:, None] & (
        rng.random((n_systems, n_examples)) < 0.05
    )
    missing = {
        "text": plan_fail,
        "image": plan_fail,
        "speech": plan_fail | speech_only,
    }
    missing["omni"] = missing["text"] | missing["image"] | missing["speech"]

    s_grid, e_grid = np.meshgrid(np.arange(n_systems), np.arange(n_examples), indexing="ij")
    s_flat, e_flat = s_grid.ravel(), e_grid.ravel()
    blocks = []

    def block(kind, track, evaluator, criterion, score, miss, invalid=None):
        status = np.where(miss, "missing_output", "ok").astype(object)
        if invalid is not None:
            status[invalid & ~miss] = "invalid"
        score = np.where(status == "ok", score, np.nan)
        blocks.append(
            pd.DataFrame(
                {
                    "system": systems[s_flat],
                    "example_id": examples[e_flat],
                    "kind": kind,
                    "track": track,
                    "evaluator": evaluator,
                    "criterion": criterion,
                    "score": score,
                    "status": status,
                }
            )
        )

    noise = rng.normal(0, 0.04, (n_systems, n_examples))
    bert = np.clip(0.8 + 0.1 * modal_q[:, [0]] + noise, 0, 1).ravel()
    block("metric", "text", "bertscore", "f1", bert, missing["text"].ravel())
    clip = np.clip(0.55 + 0.35 * modal_q[:, [1]] + 1.5 * noise, 0, 1).ravel()
    block("metric", "image", "clip", "cosine", clip, missing["image"].ravel())
    meta_invalid = (rng.random((n_systems, n_examples)) < invalid_rate / 2).ravel()
    for field in SPEECH_FIELDS:
        hit = (rng.random((n_systems, n_examples)) < 0.35 + 0.5 * modal_q[:, [2]]).astype(float)
        block(
            "metric",
            "speech",
            "speech_meta",
            field,
            hit.ravel(),
            missing["speech"].ravel(),
            meta_invalid,
        )

    track_q = {
        "text": modal_q[:, 0],
        "image": modal_q[:, 1],
        "speech": modal_q[:, 2],
        "omni": omni_q,
    }
    for track, criteria in RUBRICS.items():
        for j in range(judges_per_track):
            # the paper's judge ids (Table 6; panels A, B, C of F.6), then made-up ones
            judge = PAPER_JUDGES[track][j] if j < 3 else f"{track}-judge-{chr(ord('a') + j)}"
            bias = rng.normal(0, 0.05)
            item = rng.normal(0, 0.12, (n_systems, n_examples))
            bad_record = rng.random((n_systems, n_examples)) < invalid_rate
            bad_criterion = rng.integers(0, len(criteria), (n_systems, n_examples))
            for c, criterion in enumerate(criteria):
                raw = 1 + 9 * (
                    track_q[track][:, None]
                    + bias
                    + item
                    + rng.normal(0, 0.08, (n_systems, n_examples))
                )
                score = np.clip(np.rint(raw), 1, 10).ravel()
                invalid = (bad_record & (bad_criterion == c)).ravel()
                block("judge", track, judge, criterion, score, missing[track].ravel(), invalid)
    frame = pd.concat(blocks, ignore_index=True)
    return _normalise(frame[list(COLUMNS)])


def write_scores_frame(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write a scores DataFrame as ``scores.jsonl`` (null for missing scores)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = frame[list(COLUMNS)].astype({c: str for c in COLUMNS if c != "score"})
    out.to_json(path, orient="records", lines=True, force_ascii=False, double_precision=15)
    return path
