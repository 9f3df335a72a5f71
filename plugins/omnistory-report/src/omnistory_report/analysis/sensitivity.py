"""Sensitivity of the ranking to the aggregation rule (Appendix F.8, Tables 27 and 28).

All functions take the seven Total Average components with the automatic metrics already scaled to
0–10 (:func:`omnistory_report.analysis.leaderboard.scaled_components`); systems with any missing
component are left out.  Rankings use unrounded scores with average ranks for ties (1 = best).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from omnistory_report.analysis.leaderboard import COMPONENTS

DIRICHLET_SEED = 20260925
UNIFORM_SEED = 20260926
DEFAULT_WEIGHT_DRAWS = 10_000


def _complete(components: pd.DataFrame) -> pd.DataFrame:
    return components[list(COMPONENTS)].dropna()


def _desc_ranks(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(-np.asarray(scores, dtype=float), method="average", axis=axis)


def covariance_shares(components: pd.DataFrame) -> pd.DataFrame:
    """Table 27: range, sample SD and c_k = Cov(X_k, T) / (7 Var(T)) of each component."""
    x = _complete(components)
    total = x.mean(axis=1)
    var_t = total.var(ddof=1)
    rows = []
    for c in COMPONENTS:
        col = x[c]
        cov = float(np.cov(col, total, ddof=1)[0, 1]) if len(x) > 1 else np.nan
        rows.append(
            {
                "component": c,
                "min": col.min(),
                "max": col.max(),
                "range": col.max() - col.min(),
                "sd": col.std(ddof=1),
                "share": cov / (len(COMPONENTS) * var_t) if var_t > 0 else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=["component", "min", "max", "range", "sd", "share"])


def _variant_scores(x: pd.DataFrame) -> dict[str, np.ndarray]:
    v = x.to_numpy(float)
    bert, clip, meta, jt, ji, js, jo = v.T
    sd = v.std(axis=0, ddof=1) if len(v) > 1 else np.ones(v.shape[1])
    span = v.max(axis=0) - v.min(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(sd > 0, (v - v.mean(axis=0)) / sd, 0.0)
        mm = np.where(span > 0, (v - v.min(axis=0)) / span, 0.0)
    asc_ranks = np.column_stack([-_desc_ranks(v[:, j]) for j in range(v.shape[1])])
    variants = {
        "equal_seven": v.mean(axis=1),
        "family_equal": ((bert + jt) / 2 + (clip + ji) / 2 + (meta + js) / 2 + jo) / 4,
        "automatic_only": (bert + clip + meta) / 3,
        "judge_only": (jt + ji + js + jo) / 4,
        "zscore": z.mean(axis=1),
        "minmax": mm.mean(axis=1),
        "mean_rank": asc_ranks.mean(axis=1),
    }
    for j, c in enumerate(COMPONENTS):
        variants[f"leave_out_{c}"] = np.delete(v, j, axis=1).mean(axis=1)
    return variants


def aggregation_variants(components: pd.DataFrame, top: int = 5) -> pd.DataFrame:
    """Table 28: each alternative rule against equal weighting of the seven components."""
    x = _complete(components)
    return ranking_comparison(np.array(x.index, dtype=object), _variant_scores(x), top)


def ranking_comparison(
    systems: np.ndarray, variants: dict[str, np.ndarray], top: int = 5
) -> pd.DataFrame:
    """One Table 28 row per variant: its ranking against ``variants["equal_seven"]`` (the same
    ``systems``, one score each; average ranks for ties, 1 = best)."""
    from scipy.stats import kendalltau, spearmanr

    base = _desc_ranks(variants["equal_seven"])
    winner = systems[np.argmin(base)] if len(systems) else None
    base_top = set(systems[np.argsort(base, kind="stable")[:top]])
    rows = []
    for name, scores in variants.items():
        ranks = _desc_ranks(scores)
        several = len(systems) > 2
        rows.append(
            {
                "variant": name,
                "spearman": float(spearmanr(base, ranks).statistic) if several else np.nan,
                "kendall_tau_b": float(kendalltau(base, ranks).statistic) if several else np.nan,
                "winner": systems[np.argmin(ranks)] if len(systems) else None,
                "original_winner_rank": float(ranks[list(systems).index(winner)])
                if winner is not None
                else np.nan,
                f"top{top}_shared": len(
                    base_top & set(systems[np.argsort(ranks, kind="stable")[:top]])
                ),
                "max_displacement": float(np.abs(ranks - base).max()) if len(systems) else np.nan,
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class WeightSweep:
    """Summary and per-system winning frequencies of one random-weight sweep."""

    summary: pd.DataFrame
    winners: pd.DataFrame


def weight_sweep(
    components: pd.DataFrame,
    distribution: str = "dirichlet",
    draws: int = DEFAULT_WEIGHT_DRAWS,
    seed: int | None = None,
) -> WeightSweep:
    """Random component weights: Dirichlet(1,...,1) or normalised U(0.5, 2) (F.8).

    Reports how often each system ranks first and the Spearman correlation of each weighted ranking
    with the equal-weight ranking (median and 5th–95th percentiles).
    """
    x = _complete(components)
    v = x.to_numpy(float)
    n_comp = len(COMPONENTS)
    if distribution == "dirichlet":
        rng = np.random.default_rng(DIRICHLET_SEED if seed is None else seed)
        w = rng.dirichlet(np.ones(n_comp), size=draws)
    elif distribution == "uniform":
        rng = np.random.default_rng(UNIFORM_SEED if seed is None else seed)
        w = rng.uniform(0.5, 2.0, size=(draws, n_comp))
        w /= w.sum(axis=1, keepdims=True)
    else:
        raise ValueError(f"distribution must be 'dirichlet' or 'uniform', got {distribution!r}")
    systems = np.array(x.index, dtype=object)
    base = _desc_ranks(v.mean(axis=1))
    ranks = _desc_ranks(w @ v.T, axis=1)  # (draws, systems)
    bc = base - base.mean()
    rc = ranks - ranks.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (rc @ bc) / np.sqrt((rc * rc).sum(axis=1) * (bc @ bc))
    share_first = (ranks == 1).mean(axis=0)
    original = systems[np.argmin(base)] if len(systems) else None
    summary = pd.DataFrame(
        [
            {
                "distribution": distribution,
                "draws": draws,
                "seed": int(
                    DIRICHLET_SEED
                    if seed is None and distribution == "dirichlet"
                    else UNIFORM_SEED
                    if seed is None
                    else seed
                ),
                "original_winner": original,
                "original_winner_share": float(share_first[np.argmin(base)])
                if len(systems)
                else np.nan,
                "median_spearman": float(np.nanmedian(rho)) if len(systems) > 2 else np.nan,
                "spearman_p05": float(np.nanpercentile(rho, 5)) if len(systems) > 2 else np.nan,
                "spearman_p95": float(np.nanpercentile(rho, 95)) if len(systems) > 2 else np.nan,
            }
        ]
    )
    winners = pd.DataFrame({"system": systems, "share_first": share_first})
    winners = winners.sort_values(["share_first", "system"], ascending=[False, True])
    return WeightSweep(summary=summary, winners=winners.reset_index(drop=True))
