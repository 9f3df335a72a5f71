"""Narration-length controls of the text judge (F.8, the length rows of Table 28), by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_helpers import cube_of, judge
from omnistory_report.analysis.leaderboard import COMPONENTS
from omnistory_report.analysis.length_controls import (
    LengthControls,
    length_variant_rows,
    quantile_bins,
    text_judge_length_controls,
)


def test_quantile_bins_are_right_closed_with_merged_edges():
    # median 2.5: (-inf, 2.5], (2.5, inf)
    assert list(quantile_bins(np.array([1, 2, 3, 4]), 2)) == [0, 0, 1, 1]
    # the median is 1: a value equal to the edge stays in the lower bin
    assert list(quantile_bins(np.array([1, 1, 1, 2]), 2)) == [0, 0, 0, 1]
    # 20 bins of 3 distinct values: duplicate edges merge, at most 3 bins are occupied
    assert len(set(quantile_bins(np.array([5, 5, 7, 9, 9, 9]), 20))) == 3


def _table():
    """Text judge tj: valid a/e1..e3 and b/e1..e2; invalid, error and missing cells elsewhere.
    Judge tj2 has one valid observation (a/e1) and an invalid one for b."""
    groups = [
        judge("a", "e1", "text", "tj", [10] * 4),
        judge("a", "e2", "text", "tj", [10] * 4),
        judge("a", "e3", "text", "tj", [1] * 4),
        judge("a", "e4", "text", "tj", None, status="error"),
        judge("b", "e1", "text", "tj", [1] * 4),
        judge("b", "e2", "text", "tj", [1] * 4),
        judge("b", "e3", "text", "tj", [5, 5, None, 5]),  # one invalid criterion
        judge("b", "e4", "text", "tj", None, status="missing_output"),
        judge("a", "e1", "text", "tj2", [5] * 4),
        judge("b", "e1", "text", "tj2", [None] * 4),
    ]
    _, cube = cube_of(groups)
    lengths = pd.DataFrame(
        {
            "system": ["a", "a", "a", "a", "b", "b", "b"],
            "example_id": ["e1", "e2", "e3", "e4", "e1", "e2", "e3"],
            "length": [10, 20, 30, 99, 10, 40, 50],
        }
    )
    return cube, lengths


def test_m1_and_clipped_m1_by_hand():
    cube, lengths = _table()
    table = text_judge_length_controls(cube, lengths, m1_bins=2).text_judge
    # tj pooled: (10, L10) (10, L20) (1, L30) (1, L10) (1, L40); mean 23/5 = 4.6; median length 20
    # bin 1 = {L10, L20, L10}: mean 7; bin 2 = {L30, L40}: mean 1
    # adjusted a: 7.6, 7.6, 4.6 -> 6.6; b: -1.4, 4.6 -> 1.6 (clipped: 1, 4.6 -> 2.8)
    # tj2: a only (5); b has no valid observation -> tj alone
    assert table.loc["a", "length_m1"] == pytest.approx((6.6 + 5.0) / 2)
    assert table.loc["b", "length_m1"] == pytest.approx(1.6)
    assert table.loc["a", "length_m1_clipped"] == pytest.approx((6.6 + 5.0) / 2)
    assert table.loc["b", "length_m1_clipped"] == pytest.approx(2.8)


def test_observations_without_a_length_are_left_out_and_counted():
    cube, lengths = _table()
    short = lengths[~((lengths["system"] == "a") & (lengths["example_id"] == "e3"))]
    controls = text_judge_length_controls(cube, short, m1_bins=2)
    assert "1 valid text-judge observation(s) without a known length left out" in controls.note
    # tj without a/e3: pooled (10, L10) (10, L20) (1, L10) (1, L40), mean 5.5, median length 15
    # bin {L10, L10}: mean 5.5; bin {L20, L40}: mean 5.5 -> nothing moves: a = 10, b = 1
    table = controls.text_judge
    assert table.loc["a", "length_m1"] == pytest.approx((10 + 5) / 2)
    assert table.loc["b", "length_m1"] == pytest.approx(1.0)


def test_m2_common_support_by_hand():
    _, lengths = _table()
    _, tj_cube = cube_of(
        [
            judge("a", "e1", "text", "tj", [10] * 4),
            judge("a", "e2", "text", "tj", [10] * 4),
            judge("a", "e3", "text", "tj", [1] * 4),
            judge("b", "e1", "text", "tj", [1] * 4),
            judge("b", "e2", "text", "tj", [1] * 4),
            judge("b", "e3", "text", "tj", None, status="invalid"),
        ]
    )
    controls = text_judge_length_controls(tj_cube, lengths, m2_bins=2, m2_min_count=1)
    # bins at the pooled median 20: {L10, L20, L10} (3 obs) and {L30, L40} (2 obs): weights .6/.4
    # a: bin means 10 and 1 -> 6.4; b: 1 and 1 -> 1
    assert controls.text_judge.loc["a", "length_m2"] == pytest.approx(0.6 * 10 + 0.4 * 1)
    assert controls.text_judge.loc["b", "length_m2"] == pytest.approx(1.0)
    assert "2 of 2 pooled length bins" in controls.note
    # with at least two observations per (judge, system) group no bin survives (b has 1 + 1)
    strict = text_judge_length_controls(tj_cube, lengths, m2_bins=2, m2_min_count=2)
    assert strict.text_judge["length_m2"].isna().all()
    assert "undefined" in strict.note


def test_quadratic_log_length_removes_an_exact_quadratic_trend():
    lengths_list = [12, 30, 55, 80, 140, 200]
    groups = []
    rows = []
    for i, n in enumerate(lengths_list):
        system = "a" if i < 3 else "b"
        score = 2.0 + 0.5 * np.log(n) - 0.05 * np.log(n) ** 2
        groups.append(judge(system, f"e{i}", "text", "tj", [score] * 4))
        rows.append({"system": system, "example_id": f"e{i}", "length": n})
    _, cube = cube_of(groups)
    table = text_judge_length_controls(cube, pd.DataFrame(rows)).text_judge
    pooled = np.mean([2.0 + 0.5 * np.log(n) - 0.05 * np.log(n) ** 2 for n in lengths_list])
    # every residual is zero: both systems get the judge's pooled mean
    assert table.loc["a", "length_quadratic_log"] == pytest.approx(pooled, abs=1e-9)
    assert table.loc["b", "length_quadratic_log"] == pytest.approx(pooled, abs=1e-9)


def test_length_rows_replace_only_the_text_judge():
    comps = pd.DataFrame(
        {c: [5.0, 5.0, 5.0] for c in COMPONENTS}, index=pd.Index(["x", "y", "z"], name="system")
    )
    comps["judge_text"] = [9.0, 7.0, 5.0]  # original ranking x > y > z
    adjusted = pd.DataFrame(
        {
            "length_m1": [1.0, 7.0, 9.0],  # reversed
            "length_m1_clipped": [9.0, 7.0, 5.0],  # unchanged
            "length_quadratic_log": [9.0, 7.0, 5.0],
            "length_m2": [8.0, 8.0, 5.0],  # x and y tie
        },
        index=comps.index,
    )
    rows = length_variant_rows(comps, LengthControls(adjusted, "")).set_index("variant")
    assert list(rows.index) == [
        "length_m1",
        "length_m1_clipped",
        "length_quadratic_log",
        "length_m2",
    ]
    m1 = rows.loc["length_m1"]
    assert (m1["spearman"], m1["winner"], m1["original_winner_rank"]) == (-1.0, "z", 3.0)
    assert m1["max_displacement"] == 2.0
    assert rows.loc["length_m1_clipped", "spearman"] == pytest.approx(1.0)
    # ranks 1.5, 1.5, 3 against 1, 2, 3: Spearman = 0.866..., winner by first position
    assert rows.loc["length_m2", "spearman"] == pytest.approx(np.sqrt(3) / 2)
    assert rows.loc["length_m2", "max_displacement"] == 0.5
