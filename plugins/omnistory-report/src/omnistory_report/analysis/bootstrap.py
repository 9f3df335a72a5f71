"""Paired bootstrap over examples (Appendix F.7), vectorised.

Each replicate draws examples with replacement; w_i is the multiplicity of example i.  For every
cell k (a metric, or one judge of one track) and system s,

    mu*_sk = sum_i w_i v_ski x_ski / sum_i w_i v_ski

so the validity masks and each cell's own denominator are kept, and the components are then
aggregated exactly like the point estimate (:func:`aggregate_cells`).  The same draw is used for
every system, which is what makes differences and ranks *paired*.  With the cube stored as
(examples x cells*systems) matrices, a block of replicates is two matrix products.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from omnistory_report.analysis.correlations import (
    batched_partial,
    batched_pearson,
    holm,
    partial_correlation,
    pearson,
    stable,
)
from omnistory_report.analysis.cube import ScoreCube
from omnistory_report.analysis.leaderboard import (
    POLICIES,
    aggregate_cells,
    component_matrix,
    totals,
)

DEFAULT_DRAWS = 20_000
DEFAULT_SEED = 20260925
# Fixed so that a seed gives the same replicates whatever the caller does; 500 replicates x 900
# examples keeps each block's multiplicity matrix at 3.6 MB.
_BLOCK = 500
SCORES = ("total", "text", "image", "speech", "omni")


def multiplicities(n_examples: int, draws: int, seed: int) -> Iterator[np.ndarray]:
    """Yield blocks (b, n_examples) of resampling multiplicities; b <= 500, in order."""
    if n_examples <= 0:
        raise ValueError("the bootstrap needs at least one example")
    rng = np.random.default_rng(seed)
    remaining = draws
    while remaining > 0:
        b = min(_BLOCK, remaining)
        idx = rng.integers(0, n_examples, size=(b, n_examples))
        idx += np.arange(b)[:, None] * n_examples
        counts = np.bincount(idx.ravel(), minlength=b * n_examples)
        yield counts.reshape(b, n_examples).astype(np.float64)
        remaining -= b


@dataclass(frozen=True)
class BootstrapResult:
    """Point estimates and replicates of the scores of the systems with a finite point total."""

    systems: tuple[str, ...]
    draws: int
    seed: int
    policy: str
    point: dict[str, np.ndarray]
    replicates: dict[str, np.ndarray]

    def rank_replicates(self) -> np.ndarray:
        """(B, S) ranks per replicate; 1 = largest total, average ranks for exact ties."""
        from scipy.stats import rankdata

        return rankdata(-self.replicates["total"], axis=1, method="average", nan_policy="omit")


def _scores_from_components(comps: np.ndarray) -> dict[str, np.ndarray]:
    t = totals(np.moveaxis(comps, -2, 0))
    return {
        "total": t["total"],
        "text": t["text_score"],
        "image": t["image_score"],
        "speech": t["speech_score"],
        "omni": comps[..., 6, :],
    }


def paired_bootstrap(
    cube: ScoreCube,
    draws: int = DEFAULT_DRAWS,
    seed: int = DEFAULT_SEED,
    policy: str = "valid",
) -> BootstrapResult:
    """Resample examples ``draws`` times with one shared draw for all systems and cells."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if draws < 1:
        raise ValueError(f"draws must be positive, got {draws}")
    point_all = _scores_from_components(component_matrix(cube, policy))
    keep = np.flatnonzero(np.isfinite(point_all["total"]))
    n_cells, n_ex = len(cube.cells), len(cube.examples)
    n_sys = len(keep)
    values = (cube.values * cube.valid)[:, keep, :]
    weights_num = values.reshape(n_cells * n_sys, n_ex).T.copy()
    if policy == "valid":
        weights_den = cube.valid[:, keep, :].reshape(n_cells * n_sys, n_ex).T.astype(np.float64)
        include_point = np.asarray(cube.valid[:, keep, :].any(axis=2))
    elif cube.error is None:
        weights_den = cube.present[keep, :].T.astype(np.float64)
        include_point = np.asarray(cube.has_rows[:, keep, :].any(axis=2))
    else:  # examples whose evaluator erred leave that cell's denominator only
        weights_den = cube.scored[:, keep, :].reshape(n_cells * n_sys, n_ex).T.astype(np.float64)
        include_point = np.asarray(cube.has_rows[:, keep, :].any(axis=2))
    per_cell = policy == "valid" or cube.error is not None

    reps = {name: np.empty((draws, n_sys)) for name in SCORES}
    start = 0
    for w in multiplicities(n_ex, draws, seed):
        b = w.shape[0]
        num = (w @ weights_num).reshape(b, n_cells, n_sys)
        den = w @ weights_den
        den = den.reshape(b, n_cells, n_sys) if per_cell else den[:, None, :]
        include = include_point[None] & (den > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(include, num / np.where(den > 0, den, 1.0), np.nan)
        scores = _scores_from_components(aggregate_cells(cube, means, include))
        for name in SCORES:
            reps[name][start : start + b] = scores[name]
        start += b
    return BootstrapResult(
        systems=tuple(cube.systems[i] for i in keep),
        draws=draws,
        seed=seed,
        policy=policy,
        point={name: point_all[name][keep] for name in SCORES},
        replicates=reps,
    )


def total_intervals(result: BootstrapResult, level: float = 0.95) -> pd.DataFrame:
    """Table 24: point total, percentile intervals of total and rank, share of draws ranked 1st."""
    from scipy.stats import rankdata

    lo_q, hi_q = 50 * (1 - level), 50 * (1 + level)
    t = result.replicates["total"]
    ranks = result.rank_replicates()
    point_rank = rankdata(-result.point["total"], method="average")
    frame = pd.DataFrame(
        {
            "system": result.systems,
            "total": result.point["total"],
            "total_lo": np.nanpercentile(t, lo_q, axis=0),
            "total_hi": np.nanpercentile(t, hi_q, axis=0),
            "rank": point_rank,
            "rank_lo": np.nanpercentile(ranks, lo_q, axis=0),
            "rank_hi": np.nanpercentile(ranks, hi_q, axis=0),
            "share_rank_1": (ranks == 1).mean(axis=0),
        }
    )
    return frame.sort_values(["rank", "system"]).reset_index(drop=True)


def pairwise_differences(
    result: BootstrapResult, alpha: float = 0.05, level: float = 0.95
) -> pd.DataFrame:
    """Table 25: every pair's paired difference, percentile interval and Holm-corrected test.

    p = 2 Phi(-|T_a - T_b| / SD_b(T*_a - T*_b)); Holm over all pairs at ``alpha``.  Pairs are
    listed in point-estimate order (a ranked above b); ``adjacent`` marks neighbouring ranks.
    """
    from scipy.stats import norm

    order = np.lexsort((np.array(result.systems), -result.point["total"]))
    n = len(order)
    ia, ib = np.triu_indices(n, k=1)
    a, b = order[ia], order[ib]
    t = result.replicates["total"]
    lo_q, hi_q = 50 * (1 - level), 50 * (1 + level)
    diff = result.point["total"][a] - result.point["total"][b]
    lo = np.empty(len(a))
    hi = np.empty(len(a))
    se = np.empty(len(a))
    share = np.empty(len(a))
    for start in range(0, len(a), 128):
        sl = slice(start, start + 128)
        d = t[:, a[sl]] - t[:, b[sl]]
        lo[sl] = np.nanpercentile(d, lo_q, axis=0)
        hi[sl] = np.nanpercentile(d, hi_q, axis=0)
        se[sl] = np.nanstd(d, axis=0, ddof=1) if t.shape[0] > 1 else np.nan
        share[sl] = np.nanmean(d > 0, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.abs(diff) / se
        p = np.where(se > 0, 2 * norm.sf(z), np.where(diff == 0, 1.0, 0.0))
    p = np.where(np.isfinite(se), p, np.nan)
    p_holm = holm(p)
    names = np.array(result.systems, dtype=object)
    return pd.DataFrame(
        {
            "system_a": names[a],
            "system_b": names[b],
            "diff": diff,
            "diff_lo": lo,
            "diff_hi": hi,
            "se": se,
            "p": p,
            "p_holm": p_holm,
            "reject_holm": p_holm <= alpha,
            "interval_excludes_zero": (lo > 0) | (hi < 0),
            "share_a_above_b": share,
            "adjacent": ib == ia + 1,
        }
    )


def _partial2(x: np.ndarray, y: np.ndarray, z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Row-wise second-order partial r_xy.zw by the recursion on first-order partials."""
    rxy_z, rxw_z, ryw_z = (
        batched_partial(x, y, z),
        batched_partial(x, w, z),
        batched_partial(y, w, z),
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rxy_z - rxw_z * ryw_z) / np.sqrt((1 - rxw_z**2) * (1 - ryw_z**2))


def correlation_intervals(
    result: BootstrapResult,
    subset: tuple[str, ...] | None = None,
    group: str = "all",
    level: float = 0.95,
) -> pd.DataFrame:
    """Table 26: bootstrap percentile intervals of modality Pearson and partial correlations.

    ``subset`` holds a fixed set of systems (e.g. semi-orchestration + any-to-any).
    """
    names = list(result.systems)
    idx = (
        np.arange(len(names))
        if subset is None
        else np.array([names.index(s) for s in subset if s in names], dtype=int)
    )
    lo_q, hi_q = 50 * (1 - level), 50 * (1 + level)
    rep = {k: result.replicates[k][:, idx] for k in ("text", "image", "speech", "omni")}
    pt = {k: result.point[k][idx] for k in ("text", "image", "speech", "omni")}
    specs: list[tuple[str, str, tuple[str, ...]]] = [
        ("text", "image", ()),
        ("text", "speech", ()),
        ("image", "speech", ()),
        ("text", "image", ("speech",)),
        ("text", "speech", ("image",)),
        ("image", "speech", ("text",)),
        ("omni", "text", ("image", "speech")),
        ("omni", "image", ("text", "speech")),
        ("omni", "speech", ("text", "image")),
    ]
    rows = []
    for x, y, controls in specs:
        if len(idx) < len(controls) + 3:
            r_point, r_rep = float("nan"), np.full(result.draws, np.nan)
        elif not controls:
            r_point, r_rep = pearson(pt[x], pt[y]), batched_pearson(rep[x], rep[y])
        elif len(controls) == 1:
            (c,) = controls
            r_point = partial_correlation(pt[x], pt[y], pt[c])[0]
            r_rep = batched_partial(rep[x], rep[y], rep[c])
        else:
            c1, c2 = controls
            r_point = partial_correlation(pt[x], pt[y], np.column_stack([pt[c1], pt[c2]]))[0]
            r_rep = _partial2(rep[x], rep[y], rep[c1], rep[c2])
        finite = r_rep[np.isfinite(r_rep)]
        rows.append(
            {
                "group": group,
                "x": x,
                "y": y,
                "controls": ",".join(controls),
                "n_systems": len(idx),
                "r": stable(r_point),
                # the replicates come from matrix products: their last bits vary by CPU
                "r_lo": stable(np.percentile(finite, lo_q)) if len(finite) else np.nan,
                "r_hi": stable(np.percentile(finite, hi_q)) if len(finite) else np.nan,
            }
        )
    return pd.DataFrame(rows)
