"""Narration-length controls of the text-judge component (App. F.8; the length rows of Table 28).

Only the text-judge component is replaced; the other six Total Average components stay as they are
(valid-only).  Every adjustment works on each text judge's *valid* observations (system, example)
with a known generated length L (trimmed Unicode characters, > 0), then recomputes that judge's
per-system mean over the same observations and averages the judges equally (a judge without an
observation for a system is left out, as in the valid-only leaderboard):

* **M1** — per judge, the pooled observations (all systems) are split into 20 generated-length
  quantile bins; each score loses its bin mean and regains the judge's pooled mean;
* **M1 clipped** — M1 with every adjusted score clipped to [1, 10] (sensitivity check);
* **quadratic log-length** — per judge, the residual of a pooled OLS fit of the score on
  1, log L, (log L)^2, plus the judge's pooled mean;
* **M2** — common support: five quantile bins of the lengths of all pooled (judge, system, example)
  observations; only bins with at least five observations in *every* (judge, system) group are
  kept; each group's mean is the weighted mean of its bin means with weights proportional to the
  pooled counts in the kept bins.

Quantile bins are (q_{k-1}, q_k] at the pooled k/B quantiles (linear interpolation), duplicate
edges merged (``pandas.qcut`` semantics).  The adjusted values are diagnostics, not 1–10 ratings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from omnistory_report.analysis.correlations import residualize
from omnistory_report.analysis.cube import ScoreCube
from omnistory_report.analysis.leaderboard import COMPONENTS
from omnistory_report.analysis.sensitivity import ranking_comparison

M1_BINS = 20
M2_BINS = 5
M2_MIN_COUNT = 5
LENGTH_VARIANTS: tuple[str, ...] = (
    "length_m1",
    "length_m1_clipped",
    "length_quadratic_log",
    "length_m2",
)


@dataclass(frozen=True)
class LengthControls:
    """Adjusted text-judge components (systems x variants) and a note on the M2 support."""

    text_judge: pd.DataFrame
    note: str


def length_matrix(cube: ScoreCube, lengths: pd.DataFrame) -> np.ndarray:
    """(S, E) generated lengths aligned to the cube; NaN where unknown or empty."""
    out = np.full((len(cube.systems), len(cube.examples)), np.nan)
    s_idx = {s: i for i, s in enumerate(cube.systems)}
    e_idx = {e: i for i, e in enumerate(cube.examples)}
    data = lengths[lengths["system"].isin(s_idx) & lengths["example_id"].isin(e_idx)]
    data = data[data["length"] > 0]
    s = data["system"].map(s_idx).to_numpy(int)
    e = data["example_id"].map(e_idx).to_numpy(int)
    out[s, e] = data["length"].to_numpy(float)
    return out


def quantile_bins(values: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin index of each value: (q_{k-1}, q_k] at the k/n_bins quantiles, equal edges merged."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    edges = np.unique(np.quantile(values, np.arange(1, n_bins) / n_bins))
    return np.searchsorted(edges, values, side="left").astype(np.int64)


def _bin_centred(x: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """x minus its bin mean plus the pooled mean."""
    sums = np.bincount(bins, weights=x)
    counts = np.bincount(bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    return x - means[bins] + x.mean()


def _system_means(s: np.ndarray, x: np.ndarray, n_sys: int) -> np.ndarray:
    counts = np.bincount(s, minlength=n_sys)
    sums = np.bincount(s, weights=x, minlength=n_sys)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _equal_judges(per_judge: list[np.ndarray], n_sys: int) -> np.ndarray:
    if not per_judge:
        return np.full(n_sys, np.nan)
    stacked = np.vstack(per_judge)
    n = np.isfinite(stacked).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.nansum(stacked, axis=0) / np.maximum(n, 1), np.nan)


def text_judge_length_controls(
    cube: ScoreCube,
    lengths: pd.DataFrame,
    m1_bins: int = M1_BINS,
    m2_bins: int = M2_BINS,
    m2_min_count: int = M2_MIN_COUNT,
) -> LengthControls:
    """The text-judge component (1–10 scale) per system under each length control.

    ``lengths``: columns ``system, example_id, length`` (see :func:`length_matrix`).
    """
    n_sys = len(cube.systems)
    length = length_matrix(cube, lengths)
    obs = []  # per judge: system index, score, length
    unknown = 0  # valid observations without a known length: left out of every control
    for k in cube.judge_indices("text"):
        unknown += int((cube.valid[k] & ~np.isfinite(length)).sum())
        mask = cube.valid[k] & np.isfinite(length)
        s, e = np.nonzero(mask)
        obs.append((s, cube.values[k][s, e], length[s, e]))
    obs = [o for o in obs if len(o[0])]

    m1, m1c, quad = [], [], []
    for s, x, n in obs:
        adjusted = _bin_centred(x, quantile_bins(n, m1_bins))
        m1.append(_system_means(s, adjusted, n_sys))
        m1c.append(_system_means(s, np.clip(adjusted, 1.0, 10.0), n_sys))
        log_n = np.log(n)
        if len(x) > 3:
            resid = residualize(x, np.column_stack([log_n, log_n**2])) + x.mean()
        else:
            resid = np.full(len(x), np.nan)
        quad.append(_system_means(s, resid, n_sys))

    m2, note = _m2(obs, n_sys, m2_bins, m2_min_count)
    table = pd.DataFrame(
        {
            "length_m1": _equal_judges(m1, n_sys),
            "length_m1_clipped": _equal_judges(m1c, n_sys),
            "length_quadratic_log": _equal_judges(quad, n_sys),
            "length_m2": m2,
        },
        index=pd.Index(cube.systems, name="system"),
    )
    if unknown:
        note += f"; {unknown} valid text-judge observation(s) without a known length left out"
    return LengthControls(table, note)


def _m2(
    obs: list[tuple[np.ndarray, np.ndarray, np.ndarray]], n_sys: int, n_bins_q: int, min_count: int
) -> tuple[np.ndarray, str]:
    if not obs:
        return np.full(n_sys, np.nan), "M2: no valid text-judge observation with a known length"
    pooled = np.concatenate([n for _, _, n in obs])
    edges = np.unique(np.quantile(pooled, np.arange(1, n_bins_q) / n_bins_q))
    n_bins = len(edges) + 1
    counts, sums = [], []  # per (judge, system) group with observations
    owners = []
    for g, (s, x, n) in enumerate(obs):
        bins = np.searchsorted(edges, n, side="left")
        flat = s * n_bins + bins
        c = np.bincount(flat, minlength=n_sys * n_bins).reshape(n_sys, n_bins)
        t = np.bincount(flat, weights=x, minlength=n_sys * n_bins).reshape(n_sys, n_bins)
        for sys_i in np.unique(s):
            counts.append(c[sys_i])
            sums.append(t[sys_i])
            owners.append((g, sys_i))
    count = np.vstack(counts)
    keep = (count >= min_count).all(axis=0)
    if not keep.any():
        return np.full(n_sys, np.nan), (
            f"M2: no length bin has at least {min_count} valid observations in every "
            "(judge, system) group; M2 is undefined"
        )
    pooled_count = count.sum(axis=0)
    weights = np.where(keep, pooled_count, 0) / pooled_count[keep].sum()
    group_means = np.vstack(sums)[:, keep] / count[:, keep]
    value = group_means @ weights[keep]
    per_judge = [np.full(n_sys, np.nan) for _ in obs]
    for (g, sys_i), v in zip(owners, value, strict=True):
        per_judge[g][sys_i] = v
    upper = np.concatenate([edges, [pooled.max()]])[keep].max()
    retained = count[:, keep].sum(axis=1) / count.sum(axis=1)
    note = (
        f"M2 common support: {int(keep.sum())} of {n_bins} pooled length bins through "
        f"{upper:.6g} characters, {100 * pooled_count[keep].sum() / pooled_count.sum():.2f}% of "
        f"pooled observations ({100 * retained.min():.2f}–{100 * retained.max():.2f}% within "
        "(judge, system) groups)"
    )
    return _equal_judges(per_judge, n_sys), note


def length_variant_rows(
    components: pd.DataFrame, controls: LengthControls, top: int = 5
) -> pd.DataFrame:
    """Table 28's length rows: each control replaces the text-judge component of the scaled
    components (:func:`scaled_components`) and is ranked against equal weights, over the systems
    complete in all seven components and defined under that control (all NaN when none is).
    """
    x = components[list(COMPONENTS)].dropna()
    adjusted = controls.text_judge.reindex(x.index)
    rows = []
    for name in LENGTH_VARIANTS:
        defined = adjusted[name].notna().to_numpy()
        sub = x[defined]
        base = sub.mean(axis=1).to_numpy()
        others = sub.drop(columns="judge_text").sum(axis=1).to_numpy()
        variant = (others + adjusted[name].to_numpy()[defined]) / len(COMPONENTS)
        table = ranking_comparison(
            np.array(sub.index, dtype=object), {"equal_seven": base, name: variant}, top
        )
        row = table[table["variant"] == name]
        if not len(sub):
            row = row.assign(winner=None, **{f"top{top}_shared": np.nan})
        rows.append(row)
    return pd.concat(rows, ignore_index=True)
