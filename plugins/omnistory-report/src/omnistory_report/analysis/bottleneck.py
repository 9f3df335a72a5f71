"""Modality-bottleneck diagnostics, exactly as Appendix E.6 defines them (Tables 2 and 15).

* within-modality rank positions p = (r - 1) / (N - 1), ranks ascending with average ranks for ties
  (not r / N);
* weakest-modality count: argmin of p with ties assigned in Text–Image–Speech order (so the counts
  sum to N), plus the tie-split variant the paper reports as a check;
* mean weakest-modality rank gap: d = 100 max(0, min_{k != m} p_k - p_m), averaged over all N;
* IQR with linear interpolation h = 1 + (N - 1) q;
* Max Total (Bottom Tercile): the largest Total among configurations with p <= alpha (1/3).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

MODALITIES: tuple[str, ...] = ("text", "image", "speech")
# p and alpha are both correctly rounded quotients; the slack only guards against an alpha given
# as a rounded decimal such as 0.3333333333333333 from a config file.
_CUTOFF_SLACK = 1e-12


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ascending ranks 1..N with tied values sharing the mean of their positions."""
    from scipy.stats import rankdata

    return rankdata(np.asarray(values, dtype=float), method="average")


def rank_positions(scores: pd.DataFrame, modalities: tuple[str, ...] = MODALITIES) -> pd.DataFrame:
    """p_bm = (r_bm - 1) / (N - 1) for each modality column (Eq. 4)."""
    n = len(scores)
    if n < 2:
        raise ValueError("rank positions need at least two configurations")
    return pd.DataFrame(
        {m: (average_ranks(scores[m].to_numpy()) - 1.0) / (n - 1) for m in modalities},
        index=scores.index,
    )


def quantile_linear(values: np.ndarray, q: float) -> float:
    """Empirical q-quantile with linear interpolation (Eq. 10): h = 1 + (N - 1) q."""
    s = np.sort(np.asarray(values, dtype=float))
    n = len(s)
    if n == 0:
        return float("nan")
    h = 1.0 + (n - 1) * q
    j = math.floor(h)
    lam = h - j
    if j >= n:
        return float(s[n - 1])
    return float((1.0 - lam) * s[j - 1] + lam * s[j])


def system_bottlenecks(scores: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: rank positions, the assigned weakest modality and the three gaps."""
    pos = rank_positions(scores)
    p = pos[list(MODALITIES)].to_numpy()
    weakest = np.argmin(p, axis=1)  # argmin returns the first minimum: Text-Image-Speech order
    out = pd.DataFrame(index=scores.index)
    for j, m in enumerate(MODALITIES):
        out[f"p_{m}"] = p[:, j]
    out["weakest"] = [MODALITIES[j] for j in weakest]
    out["weakest_tied"] = (p == p.min(axis=1, keepdims=True)).sum(axis=1) > 1
    for j, m in enumerate(MODALITIES):
        others = np.delete(p, j, axis=1).min(axis=1)
        out[f"gap_{m}"] = 100.0 * np.maximum(0.0, others - p[:, j])
    return out


def bottleneck_diagnostics(scores: pd.DataFrame, alpha: float = 1.0 / 3.0) -> pd.DataFrame:
    """Table 2: rows are diagnostics, columns the three modalities.

    ``scores`` has columns ``text, image, speech, total`` (one row per configuration); rows with
    any of them missing are dropped, so N is the number of complete configurations.
    """
    data = scores[[*MODALITIES, "total"]].dropna()
    n = len(data)
    per = system_bottlenecks(data)
    p = per[[f"p_{m}" for m in MODALITIES]].to_numpy()
    is_min = p == p.min(axis=1, keepdims=True)
    split = (is_min / is_min.sum(axis=1, keepdims=True)).sum(axis=0)
    total = data["total"].to_numpy()
    rows: dict[str, dict[str, float]] = {
        "weakest_count": {},
        "weakest_count_tie_split": {},
        "mean_rank_gap_pp": {},
        "iqr": {},
        "max_total_bottom": {},
        "bottom_size": {},
    }
    for j, m in enumerate(MODALITIES):
        rows["weakest_count"][m] = float((per["weakest"] == m).sum())
        rows["weakest_count_tie_split"][m] = float(split[j])
        rows["mean_rank_gap_pp"][m] = float(per[f"gap_{m}"].sum() / n)
        s = data[m].to_numpy()
        rows["iqr"][m] = quantile_linear(s, 0.75) - quantile_linear(s, 0.25)
        subset = p[:, j] <= alpha + _CUTOFF_SLACK
        rows["max_total_bottom"][m] = float(total[subset].max()) if subset.any() else float("nan")
        rows["bottom_size"][m] = float(subset.sum())
    table = pd.DataFrame.from_dict(rows, orient="index", columns=list(MODALITIES))
    table.index.name = "diagnostic"
    table.attrs["n_configurations"] = n
    table.attrs["alpha"] = alpha
    return table


def bottom_cutoff_sensitivity(
    scores: pd.DataFrame, alphas: tuple[float, ...] = (0.2, 0.25, 1.0 / 3.0, 0.4, 0.5)
) -> pd.DataFrame:
    """H_m(alpha) for several cutoffs (the E.6 sensitivity paragraph)."""
    data = scores[[*MODALITIES, "total"]].dropna()
    pos = rank_positions(data)
    total = data["total"].to_numpy()
    rows = []
    for a in alphas:
        row: dict[str, float] = {"alpha": a}
        for m in MODALITIES:
            subset = pos[m].to_numpy() <= a + _CUTOFF_SLACK
            row[m] = float(total[subset].max()) if subset.any() else float("nan")
        rows.append(row)
    return pd.DataFrame(rows, columns=["alpha", *MODALITIES])
