"""Diagnostics of the integrated (omni) judge and its rubric categories (Appendix F.3).

All scores are valid-only system scores: a category score is the equal-weight mean over the omni
judges of each judge's mean over its valid examples (:func:`criterion_scores`), the modality scores
are those of the leaderboard (:func:`modality_frame`).  Every analysis uses the systems with all
its variables defined; ``n`` says how many.

* Table 9: Pearson r of the integrated score with the text, image and speech scores (and the mean
  DreamSim distance when there are DreamSim rows);
* Table 10 / 17: partial correlations, see :mod:`omnistory_report.analysis.correlations`;
* Table 11: per category the mean over systems, sample SD, IQR (E.6 linear quantiles), loss share
  = sum over systems of (10 - score) / the same sum over all four categories, and the number of
  systems for which it is the lowest category (ties count for every tied category);
* Table 12 / Figure 12(b): partial correlation of each category with each modality score,
  controlling for the other two (OLS with intercept, t-test with n - 4 degrees of freedom);
* Figure 12(a): mean category scores within each paradigm.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from omnistory_report.analysis.bottleneck import MODALITIES, quantile_linear
from omnistory_report.analysis.correlations import _t_pvalue, partial_correlation, pearson

SCORE_MAX = 10.0


def pearson_rows(scores: pd.DataFrame, x: str, ys: Iterable[str]) -> pd.DataFrame:
    """Pearson r and two-sided p of ``x`` with each of ``ys``, each pair over the rows where both
    are finite."""
    rows = []
    for y in ys:
        data = scores[[x, y]].dropna()
        r = pearson(data[x].to_numpy(), data[y].to_numpy())
        rows.append({"x": x, "y": y, "n": len(data), "r": r, "p": _t_pvalue(r, len(data) - 2)})
    return pd.DataFrame(rows, columns=["x", "y", "n", "r", "p"])


def integrated_correlations(
    modalities: pd.DataFrame, dreamsim: pd.Series | None = None
) -> pd.DataFrame:
    """Table 9: the integrated score against the modality scores (and mean DreamSim distance)."""
    data = modalities[["omni", *MODALITIES]].copy()
    ys = list(MODALITIES)
    if dreamsim is not None:
        data["dreamsim"] = dreamsim.reindex(data.index)
        ys.append("dreamsim")
    return pearson_rows(data, "omni", ys)


def category_diagnostics(categories: pd.DataFrame) -> pd.DataFrame:
    """Table 11 from the valid-only category scores (systems x categories)."""
    data = categories.dropna()
    values = data.to_numpy(float)
    loss = (SCORE_MAX - values).sum(axis=0)
    total_loss = loss.sum()
    lowest = values == values.min(axis=1, keepdims=True) if len(values) else values.astype(bool)
    rows = []
    for j, c in enumerate(data.columns):
        col = values[:, j]
        rows.append(
            {
                "category": c,
                "n_systems": len(col),
                "mean": float(col.mean()) if len(col) else np.nan,
                "sd": float(col.std(ddof=1)) if len(col) > 1 else np.nan,
                "iqr": quantile_linear(col, 0.75) - quantile_linear(col, 0.25),
                "loss_share": float(loss[j] / total_loss) if total_loss > 0 else np.nan,
                "n_lowest": int(lowest[:, j].sum()),
            }
        )
    return pd.DataFrame(
        rows, columns=["category", "n_systems", "mean", "sd", "iqr", "loss_share", "n_lowest"]
    )


def category_partials(categories: pd.DataFrame, modalities: pd.DataFrame) -> pd.DataFrame:
    """Table 12: each category against each modality score, controlling for the other two."""
    data = categories.join(modalities[list(MODALITIES)], how="inner")
    rows = []
    for c in categories.columns:
        for m in MODALITIES:
            controls = [o for o in MODALITIES if o != m]
            sub = data[[c, *MODALITIES]].dropna()
            r, p, n = partial_correlation(
                sub[c].to_numpy(), sub[m].to_numpy(), sub[controls].to_numpy()
            )
            rows.append(
                {
                    "category": c,
                    "modality": m,
                    "controls": ",".join(controls),
                    "n": n,
                    "r": r,
                    "p": p,
                }
            )
    return pd.DataFrame(rows, columns=["category", "modality", "controls", "n", "r", "p"])


def paradigm_category_means(
    categories: pd.DataFrame, paradigms: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Figure 12(a): mean category score per paradigm (one group 'all' without paradigms)."""
    data = categories.dropna()
    group = [paradigms.get(str(s), "unknown") if paradigms else "all" for s in data.index]
    means = data.groupby(pd.Index(group, name="paradigm")).mean()
    means.insert(0, "n_systems", data.groupby(pd.Index(group, name="paradigm")).size())
    return means.reset_index()
