"""Aggregation sensitivity (Appendix F.8)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from omnistory_report.analysis.leaderboard import COMPONENTS
from omnistory_report.analysis.sensitivity import (
    aggregation_variants,
    covariance_shares,
    weight_sweep,
)


@pytest.fixture
def comps() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    base = rng.uniform(4, 8, size=(8, 1))
    data = np.clip(base + rng.normal(scale=0.7, size=(8, 7)), 0, 10)
    return pd.DataFrame(data, columns=list(COMPONENTS), index=[f"s{i}" for i in range(8)])


def test_covariance_shares_sum_to_one(comps):
    table = covariance_shares(comps)
    assert table["share"].sum() == pytest.approx(1.0, abs=1e-12)
    total = comps.mean(axis=1)
    c0 = np.cov(comps["bertscore"], total, ddof=1)[0, 1] / (7 * total.var(ddof=1))
    assert table["share"][0] == pytest.approx(c0, abs=1e-12)
    assert (table["range"] == table["max"] - table["min"]).all()


def test_variants_against_hand_values(comps):
    table = aggregation_variants(comps).set_index("variant")
    assert len(table) == 7 + 7  # seven rules incl. the original, seven leave-one-out
    assert table.loc["equal_seven", "spearman"] == pytest.approx(1.0)
    assert table.loc["equal_seven", "max_displacement"] == 0
    family = (
        (comps["bertscore"] + comps["judge_text"]) / 2
        + (comps["clip"] + comps["judge_image"]) / 2
        + (comps["speech_meta"] + comps["judge_speech"]) / 2
        + comps["judge_omni"]
    ) / 4
    assert table.loc["family_equal", "winner"] == family.idxmax()
    loo = comps.drop(columns="judge_image").mean(axis=1)
    assert table.loc["leave_out_judge_image", "winner"] == loo.idxmax()
    auto = comps[["bertscore", "clip", "speech_meta"]].mean(axis=1)
    assert table.loc["automatic_only", "winner"] == auto.idxmax()


def test_min_max_and_zscore_are_invariant_to_affine_rescaling(comps):
    scaled = comps.copy()
    scaled["bertscore"] = 3 * scaled["bertscore"] + 1
    a = aggregation_variants(comps).set_index("variant")
    b = aggregation_variants(scaled).set_index("variant")
    for v in ("zscore", "minmax", "mean_rank"):
        assert a.loc[v, "winner"] == b.loc[v, "winner"]
        assert a.loc[v, "spearman"] == pytest.approx(b.loc[v, "spearman"], abs=1e-12)


def test_weight_sweeps_are_seeded_and_consistent(comps):
    a = weight_sweep(comps, "dirichlet", draws=2000)
    b = weight_sweep(comps, "dirichlet", draws=2000)
    pd.testing.assert_frame_equal(a.winners, b.winners)
    assert a.summary["seed"][0] == 20260925
    assert a.winners["share_first"].sum() == pytest.approx(1.0)
    u = weight_sweep(comps, "uniform", draws=2000)
    assert u.summary["seed"][0] == 20260926
    # bounded weights perturb the ranking less than flat Dirichlet weights
    assert u.summary["median_spearman"][0] >= a.summary["median_spearman"][0]
    assert -1 <= a.summary["spearman_p05"][0] <= a.summary["spearman_p95"][0] <= 1


def test_dominant_system_always_wins(comps):
    c = comps.copy()
    c.loc["s3"] = 10.0
    sweep = weight_sweep(c, "dirichlet", draws=500)
    assert sweep.summary["original_winner"][0] == "s3"
    assert sweep.summary["original_winner_share"][0] == 1.0


def test_unknown_distribution(comps):
    with pytest.raises(ValueError, match="dirichlet"):
        weight_sweep(comps, "normal")
