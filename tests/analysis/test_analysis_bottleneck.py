"""Modality-bottleneck diagnostics (Appendix E.6) on tables built so that ties occur."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from omnistory_report.analysis.bottleneck import (
    bottleneck_diagnostics,
    bottom_cutoff_sensitivity,
    quantile_linear,
    rank_positions,
    system_bottlenecks,
)

TOL = 1e-12


@pytest.fixture
def tied() -> pd.DataFrame:
    # text has a tie (s2, s3), image has ties (s1, s2) and a text/image tie at the minimum (s4),
    # speech has a three-way tie (s1, s2, s3).
    return pd.DataFrame(
        {
            "text": [1.0, 2.0, 2.0, 4.0, 5.0],
            "image": [1.0, 1.0, 3.0, 4.0, 5.0],
            "speech": [2.0, 2.0, 2.0, 5.0, 1.0],
            "total": [3.0, 4.0, 5.0, 6.0, 7.0],
        },
        index=pd.Index(["s1", "s2", "s3", "s4", "s5"], name="system"),
    )


def test_rank_positions_use_average_ranks_and_r_minus_one(tied):
    pos = rank_positions(tied)
    np.testing.assert_allclose(pos["text"], [0, 0.375, 0.375, 0.75, 1.0], atol=TOL)
    np.testing.assert_allclose(pos["image"], [0.125, 0.125, 0.5, 0.75, 1.0], atol=TOL)
    np.testing.assert_allclose(pos["speech"], [0.5, 0.5, 0.5, 1.0, 0.0], atol=TOL)


def test_weakest_modality_tie_order_and_gaps(tied):
    per = system_bottlenecks(tied)
    assert list(per["weakest"]) == ["text", "image", "text", "text", "speech"]
    assert list(per["weakest_tied"]) == [False, False, False, True, False]
    np.testing.assert_allclose(per["gap_text"], [12.5, 0, 12.5, 0, 0], atol=TOL)
    np.testing.assert_allclose(per["gap_image"], [0, 25.0, 0, 0, 0], atol=TOL)
    np.testing.assert_allclose(per["gap_speech"], [0, 0, 0, 0, 100.0], atol=TOL)


def test_diagnostics_table(tied):
    diag = bottleneck_diagnostics(tied)
    assert diag.loc["weakest_count"].to_dict() == {"text": 3, "image": 1, "speech": 1}
    assert diag.loc["weakest_count"].sum() == len(tied)
    np.testing.assert_allclose(
        diag.loc["weakest_count_tie_split"].to_numpy(float), [2.5, 1.5, 1.0], atol=TOL
    )
    np.testing.assert_allclose(
        diag.loc["mean_rank_gap_pp"].to_numpy(float), [5.0, 5.0, 20.0], atol=TOL
    )
    np.testing.assert_allclose(diag.loc["iqr"].to_numpy(float), [2.0, 3.0, 0.0], atol=TOL)
    # p <= 1/3: text {s1}, image {s1, s2}, speech {s5}
    np.testing.assert_allclose(
        diag.loc["max_total_bottom"].to_numpy(float), [3.0, 4.0, 7.0], atol=TOL
    )
    np.testing.assert_allclose(diag.loc["bottom_size"].to_numpy(float), [1, 2, 1], atol=TOL)
    assert diag.attrs["n_configurations"] == 5


def test_bottom_cutoff_includes_the_boundary():
    scores = pd.DataFrame(
        {
            "text": [1.0, 2.0, 3.0, 4.0],
            "image": [4.0, 3.0, 2.0, 1.0],
            "speech": [1.0, 1.0, 1.0, 1.0],
            "total": [5.0, 6.0, 7.0, 8.0],
        }
    )
    diag = bottleneck_diagnostics(scores)
    # N = 4: p = (r - 1)/3, so rank 2 sits exactly on 1/3 and belongs to the bottom tercile.
    assert diag.loc["bottom_size", "text"] == 2
    assert diag.loc["max_total_bottom", "text"] == 6.0
    # all speech scores tie: average rank 2.5 -> p = 0.5 > 1/3, the subset is empty
    assert diag.loc["bottom_size", "speech"] == 0
    assert np.isnan(diag.loc["max_total_bottom", "speech"])
    sens = bottom_cutoff_sensitivity(scores, (0.2, 0.5))
    assert list(sens["text"]) == [5.0, 6.0]
    assert np.isnan(sens["speech"][0]) and sens["speech"][1] == 8.0


def test_quantile_linear_formula_and_numpy_agree():
    assert quantile_linear(np.array([8.0, 1.0, 4.0, 2.0]), 0.25) == pytest.approx(1.75, abs=TOL)
    assert quantile_linear(np.array([8.0, 1.0, 4.0, 2.0]), 0.75) == pytest.approx(5.0, abs=TOL)
    assert quantile_linear(np.array([8.0, 1.0, 4.0, 2.0]), 1.0) == 8.0
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 32):
        x = rng.normal(size=n)
        for q in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0):
            assert quantile_linear(x, q) == pytest.approx(np.percentile(x, 100 * q), abs=TOL)


def test_rows_with_missing_scores_are_dropped(tied):
    scores = tied.copy()
    scores.loc["s6"] = [np.nan, 1.0, 1.0, 9.0]
    assert bottleneck_diagnostics(scores).attrs["n_configurations"] == 5


def test_needs_two_configurations(tied):
    with pytest.raises(ValueError, match="at least two"):
        rank_positions(tied.iloc[:1])
