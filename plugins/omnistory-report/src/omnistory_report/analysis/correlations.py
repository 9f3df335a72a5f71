"""Configuration-level Pearson and partial correlations (Section 6.1; Tables 1, 3, 4, 9, 10, 16).

Partial correlations follow F.4: Pearson correlation between the residuals of each variable after
an ordinary least-squares regression on the controls *with an intercept*.  The two-sided p-value
uses a t statistic with n - 2 - k degrees of freedom (k controls); p-values are descriptive and
unadjusted, as in the paper.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd

MODALITY_PARTIALS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("text", "image", ("speech",)),
    ("text", "speech", ("image",)),
    ("image", "speech", ("text",)),
)
OMNI_PARTIALS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("omni", "text", ("image", "speech")),
    ("omni", "image", ("text", "speech")),
    ("omni", "speech", ("text", "image")),
)


def _t_pvalue(r: float, dof: int) -> float:
    # Student's t survival function as scipy.stats.t.sf computes it (stdtr(dof, -t), the same
    # floats), without importing scipy.stats: about 1.5 s per report, most of a small sweep's
    from scipy.special import stdtr

    if dof <= 0 or not np.isfinite(r):
        return float("nan")
    if abs(r) >= 1.0:
        return 0.0
    t = r * np.sqrt(dof / (1.0 - r * r))
    return float(2.0 * stdtr(dof, -abs(t)))


def stable(value: float, digits: int = 12) -> float:
    """``value`` to ``digits`` significant digits.  Least squares and matrix products go through
    BLAS/LAPACK kernels chosen per CPU (AVX2 and AVX-512 round differently in the last bits), so
    without this a table written on one machine is not byte-identical to the same table on
    another; 12 digits keep far more precision than any table shows."""
    v = float(value)
    if not np.isfinite(v) or v == 0.0:
        return v
    return float(f"{v:.{digits}g}")


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r; NaN when either vector is constant or shorter than 2."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if len(x) < 2:
        return float("nan")
    xc, yc = x - x.mean(), y - y.mean()
    denom = np.sqrt((xc * xc).sum() * (yc * yc).sum())
    if denom == 0:
        return float("nan")
    return float(np.clip((xc * yc).sum() / denom, -1.0, 1.0))


def residualize(y: np.ndarray, controls: np.ndarray) -> np.ndarray:
    """Residuals of y after OLS on the controls (columns) plus an intercept."""
    y = np.asarray(y, dtype=float)
    design = np.column_stack([np.ones(len(y)), np.asarray(controls, dtype=float)])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    return y - design @ coef


def partial_correlation(
    x: np.ndarray, y: np.ndarray, controls: np.ndarray
) -> tuple[float, float, int]:
    """(r, two-sided p, n) of x and y controlling for ``controls`` (n x k array)."""
    controls = np.asarray(controls, dtype=float)
    if controls.ndim == 1:
        controls = controls[:, None]
    n, k = len(x), controls.shape[1]
    if n < k + 3:
        return float("nan"), float("nan"), n
    rx, ry = residualize(x, controls), residualize(y, controls)
    if _explained(x, rx) or _explained(y, ry):  # nothing left to correlate: not defined
        return float("nan"), float("nan"), n
    r = stable(pearson(rx, ry))
    return r, _t_pvalue(r, n - 2 - k), n


#: a residual this small against the variable's own spread is rounding noise: the controls
#: explain the variable fully (e.g. an integrated score that is a mean of the controls)
_EXPLAINED = 1e-9


def _explained(values: np.ndarray, residuals: np.ndarray) -> bool:
    values = np.asarray(values, dtype=float)
    spread = float(np.abs(values - values.mean()).max()) if len(values) else 0.0
    return float(np.abs(residuals).max()) <= _EXPLAINED * max(spread, np.finfo(float).tiny)


def pearson_table(scores: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Pairwise Pearson r and two-sided p over rows with all ``columns`` finite."""
    data = scores[list(columns)].dropna()
    rows = []
    for a, b in combinations(columns, 2):
        r = pearson(data[a].to_numpy(), data[b].to_numpy())
        rows.append({"x": a, "y": b, "n": len(data), "r": r, "p": _t_pvalue(r, len(data) - 2)})
    return pd.DataFrame(rows, columns=["x", "y", "n", "r", "p"])


def correlation_matrix(scores: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Square Pearson matrix (for the heatmap) over rows with all columns finite."""
    data = scores[list(columns)].dropna()
    mat = np.eye(len(columns))
    for i, j in combinations(range(len(columns)), 2):
        mat[i, j] = mat[j, i] = pearson(data.iloc[:, i].to_numpy(), data.iloc[:, j].to_numpy())
    return pd.DataFrame(mat, index=list(columns), columns=list(columns))


def partial_table(
    scores: pd.DataFrame,
    specs: Sequence[tuple[str, str, tuple[str, ...]]] = MODALITY_PARTIALS,
    group: str = "all",
) -> pd.DataFrame:
    """Partial correlations for each (x, y, controls) spec, over rows with the variables finite."""
    rows = []
    for x, y, controls in specs:
        data = scores[[x, y, *controls]].dropna()
        r, p, n = partial_correlation(
            data[x].to_numpy(), data[y].to_numpy(), data[list(controls)].to_numpy()
        )
        rows.append(
            {"group": group, "x": x, "y": y, "controls": ",".join(controls), "n": n, "r": r, "p": p}
        )
    return pd.DataFrame(rows, columns=["group", "x", "y", "controls", "n", "r", "p"])


def holm(pvalues: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (monotone, capped at 1); NaN p-values stay NaN."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full_like(p, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = len(finite)
    if m == 0:
        return out
    order = finite[np.argsort(p[finite], kind="stable")]
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return out


def batched_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Pearson r of two (B, n) arrays (bootstrap replicates); NaN for constant rows."""
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xc * yc).sum(axis=1) / np.sqrt((xc * xc).sum(axis=1) * (yc * yc).sum(axis=1))
    return np.clip(r, -1.0, 1.0)


def batched_partial(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Row-wise first-order partial correlation r_xy.z (identical to the residual definition)."""
    rxy, rxz, ryz = batched_pearson(x, y), batched_pearson(x, z), batched_pearson(y, z)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rxy - rxz * ryz) / np.sqrt((1 - rxz**2) * (1 - ryz**2))
