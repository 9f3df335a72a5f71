"""Pearson and partial correlations (residuals after OLS with intercept)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from omnistory_report.analysis.correlations import (
    MODALITY_PARTIALS,
    batched_partial,
    correlation_matrix,
    partial_correlation,
    partial_table,
    pearson,
    pearson_table,
    residualize,
)
from scipy import stats


@pytest.fixture
def scores() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    text = rng.normal(size=32)
    image = 0.6 * text + rng.normal(scale=0.8, size=32)
    speech = 0.7 * text + 0.1 * image + rng.normal(scale=0.6, size=32)
    omni = text + image + 0.2 * speech + rng.normal(scale=0.5, size=32)
    return pd.DataFrame({"text": text, "image": image, "speech": speech, "omni": omni})


def test_pearson_and_p_value_match_scipy(scores):
    table = pearson_table(scores, ["text", "image", "speech"])
    ref = stats.pearsonr(scores["text"], scores["image"])
    row = table[(table["x"] == "text") & (table["y"] == "image")].iloc[0]
    assert row["r"] == pytest.approx(ref.statistic, abs=1e-12)
    assert row["p"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert row["n"] == 32


def test_first_order_partial_equals_textbook_formula(scores):
    x, y, z = (scores[c].to_numpy() for c in ("image", "speech", "text"))
    rxy, rxz, ryz = pearson(x, y), pearson(x, z), pearson(y, z)
    formula = (rxy - rxz * ryz) / np.sqrt((1 - rxz**2) * (1 - ryz**2))
    r, p, n = partial_correlation(x, y, z)
    assert r == pytest.approx(formula, abs=1e-12)
    # t test with n - 2 - k degrees of freedom (k = 1 control)
    t = r * np.sqrt((n - 3) / (1 - r * r))
    assert p == pytest.approx(2 * stats.t.sf(abs(t), n - 3), rel=1e-12)
    assert batched_partial(x[None], y[None], z[None])[0] == pytest.approx(formula, abs=1e-12)


def test_residuals_are_orthogonal_to_intercept_and_controls(scores):
    controls = scores[["image", "speech"]].to_numpy()
    res = residualize(scores["omni"].to_numpy(), controls)
    assert abs(res.sum()) < 1e-10
    assert np.abs(controls.T @ res).max() < 1e-10


def test_partial_table_rows(scores):
    table = partial_table(scores, MODALITY_PARTIALS)
    assert list(table["controls"]) == ["speech", "image", "text"]
    assert table["r"].between(-1, 1).all()
    # too few rows for the number of controls -> NaN, not an error
    small = partial_table(scores.iloc[:3], MODALITY_PARTIALS)
    assert small["r"].isna().all()


def test_constant_column_gives_nan(scores):
    s = scores.copy()
    s["image"] = 1.0
    assert np.isnan(pearson(s["text"], s["image"]))
    mat = correlation_matrix(s, ["text", "image"])
    assert mat.loc["text", "text"] == 1.0 and np.isnan(mat.loc["text", "image"])


def test_a_variable_its_controls_explain_fully_has_no_partial_correlation():
    """A score that is a linear combination of the controls leaves only rounding noise after the
    fit; its correlation would be noise that differs between CPUs' BLAS kernels: it is NaN."""
    rng = np.random.default_rng(3)
    text, image, speech = rng.normal(size=(3, 8))
    omni = (image + speech) / 2
    controls = np.column_stack([image, speech])
    r, p, n = partial_correlation(omni, text, controls)
    assert n == 8 and np.isnan(r) and np.isnan(p)
    # with a little variance of its own left it is defined again
    r, p, _ = partial_correlation(omni + 0.1 * rng.normal(size=8), text, controls)
    assert np.isfinite(r) and np.isfinite(p)
    # the mean of all three is not explained by two of them: r(omni, text | image, speech) = 1
    r, _, _ = partial_correlation((text + image + speech) / 3, text, controls)
    assert r == pytest.approx(1.0)


def test_t_pvalue_is_scipy_stats_t_sf_to_the_last_bit():
    """The p-value avoids importing scipy.stats (seconds per report) and must give the floats
    scipy.stats.t.sf gives, so tables written before and after are byte-identical."""
    from omnistory_report.analysis.correlations import _t_pvalue

    rng = np.random.default_rng(0)
    for r in [*rng.uniform(-0.999, 0.999, 400), 0.0, 0.5, -0.5]:
        for dof in (1, 2, 3, 7, 30, 500):
            t = r * np.sqrt(dof / (1.0 - r * r))
            assert _t_pvalue(float(r), dof) == float(2.0 * stats.t.sf(abs(t), dof))
    assert _t_pvalue(1.0, 5) == 0.0 and np.isnan(_t_pvalue(0.3, 0))
