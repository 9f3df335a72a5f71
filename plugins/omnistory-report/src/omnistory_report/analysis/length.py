"""Narration length against BERTScore and the text judge (Section 6.2, F.8, Table 30).

Length is the number of Unicode characters (code points) after trimming surrounding whitespace.
Observation-level correlations pool (system, example) pairs: with the averaged text-judge score
where *all* text judges run on that system are valid for the example, and with BERTScore where it
is valid.  These observations are not independent samples (shared transitions and modules).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from omnistory_report.analysis.cube import ScoreCube


def narration_length(text: str) -> int:
    """Unicode characters after trimming surrounding whitespace."""
    return len(text.strip())


def _corr(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    from scipy.stats import pearsonr, spearmanr  # only with something to correlate

    return float(pearsonr(x, y).statistic), float(spearmanr(x, y).statistic)


def length_per_system(
    lengths: pd.DataFrame, reference: Iterable[int] | None = None
) -> pd.DataFrame:
    """Table 30: valid (nonempty) generated narrations per system and their length statistics."""
    valid = lengths[lengths["length"] > 0]
    grouped = valid.groupby("system")["length"]
    table = pd.DataFrame(
        {
            "n_valid": grouped.size(),
            "mean_length": grouped.mean(),
            "median_length": grouped.median(),
            "sd_length": grouped.std(ddof=1),
        }
    ).reset_index()
    if reference is not None:
        ref = np.asarray(list(reference), dtype=float)
        if len(ref):
            row = {
                "system": "(ground truth)",
                "n_valid": len(ref),
                "mean_length": ref.mean(),
                "median_length": float(np.median(ref)),
                "sd_length": ref.std(ddof=1) if len(ref) > 1 else np.nan,
            }
            table = pd.concat([table, pd.DataFrame([row])], ignore_index=True)
    return table


def length_correlations(cube: ScoreCube, lengths: pd.DataFrame) -> pd.DataFrame:
    """Pooled Pearson / Spearman of generated length with the text judge and with BERTScore.

    ``lengths`` has columns ``system, example_id, length`` (nonempty candidates only count).
    """
    lengths = lengths[lengths["length"] > 0]
    s_idx = {s: i for i, s in enumerate(cube.systems)}
    e_idx = {e: i for i, e in enumerate(cube.examples)}
    known = lengths["system"].isin(s_idx) & lengths["example_id"].isin(e_idx)
    lengths = lengths[known]
    s = lengths["system"].map(s_idx).to_numpy(int)
    e = lengths["example_id"].map(e_idx).to_numpy(int)
    n = lengths["length"].to_numpy(float)

    judges = cube.judge_indices("text")
    rows = []
    if judges:
        run = np.asarray(cube.has_rows[judges].any(axis=2))  # (J, S): judge was run on the system
        all_valid = np.all(cube.valid[judges][:, s, e] | ~run[:, s], axis=0) & run[:, s].any(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            judge_mean = (cube.values[judges][:, s, e] * run[:, s]).sum(0) / run[:, s].sum(0)
        r, rho = _corr(n[all_valid], judge_mean[all_valid])
        rows.append(
            {
                "score": "text_judge",
                "n_observations": int(all_valid.sum()),
                "pearson": r,
                "spearman": rho,
            }
        )
    k = cube.metric_index("bertscore")
    if k is not None:
        ok = cube.valid[k][s, e]
        r, rho = _corr(n[ok], cube.values[k][s, e][ok])
        rows.append(
            {"score": "bertscore", "n_observations": int(ok.sum()), "pearson": r, "spearman": rho}
        )
    return pd.DataFrame(rows, columns=["score", "n_observations", "pearson", "spearman"])
