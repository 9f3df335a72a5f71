"""`error` rows (the evaluator could not answer) are neither valid nor zero: the example leaves
the cell under both policies and the cell is counted as incomplete."""

from __future__ import annotations

import math

import numpy as np
from analysis_helpers import bert, clip, cube_of, judge, meta
from omnistory_report.analysis.bootstrap import paired_bootstrap
from omnistory_report.analysis.leaderboard import (
    cell_means,
    incomplete_columns,
    judge_coverage,
    leaderboard,
)

TOL = 1e-12


def _table():
    """System A: BERTScore on e1, e2 (and erred on e3); judge j1 answered e1 only and erred on
    e2, e3; judge j2 answered all three.  System B is complete."""
    groups = [
        bert("A", "e1", 0.6),
        bert("A", "e2", 0.8),
        clip("A", "e3", 0.5),
        clip("A", "e1", 0.5),
        clip("A", "e2", 0.5),
        judge("A", "e1", "text", "j1", [6, 6, 6, 6]),
        judge("A", "e1", "text", "j2", [8, 8, 8, 8]),
        judge("A", "e2", "text", "j2", [4, 4, 4, 4]),
        judge("A", "e3", "text", "j2", [6, 6, 6, 6]),
    ]
    groups += [
        bert("A", "e3", None, status="error"),
        judge("A", "e2", "text", "j1", None, status="error"),
        judge("A", "e3", "text", "j1", None, status="error"),
    ]
    for e in ("e1", "e2", "e3"):
        groups += [bert("B", e, 0.5), clip("B", e, 0.4)]
        groups += [judge("B", e, "text", "j1", [5] * 4), judge("B", e, "text", "j2", [7] * 4)]
        for system in ("A", "B"):  # complete elsewhere, so that totals are defined
            groups += [meta(system, e, [1.0, 0.0, 1.0, 1.0])]
            groups += [judge(system, e, t, "k", [6] * 4) for t in ("image", "speech", "omni")]
    return cube_of(groups)


def test_an_erred_example_is_left_out_of_both_policies():
    _, cube = _table()
    a = leaderboard(cube).set_index("system").loc["A"]
    assert abs(a["bertscore"] - 0.7) < TOL
    assert abs(a["bertscore_zero"] - 0.7) < TOL  # not (0.6 + 0.8 + 0) / 3
    assert abs(a["judge_text"] - (6 + 6) / 2) < TOL
    assert abs(a["judge_text_zero"] - (6 + 6) / 2) < TOL  # j1 over its one answered example
    assert a["errors_bertscore"] == 1 and a["errors_judge_text"] == 2
    assert a["errors_clip"] == 0
    marked = incomplete_columns(a)
    assert {"bertscore", "bertscore_zero", "judge_text_zero", "total", "total_zero"} <= marked
    assert "clip" not in marked and "image_score" not in marked
    b = leaderboard(cube).set_index("system").loc["B"]
    assert not incomplete_columns(b)


def test_a_judge_that_never_answered_is_not_a_zero():
    groups = [bert("A", e, 0.5) for e in ("e1", "e2")]
    groups += [judge("A", e, "text", "j1", None, status="error") for e in ("e1", "e2")]
    _, cube = cube_of(groups)
    a = leaderboard(cube).set_index("system").loc["A"]
    assert math.isnan(a["judge_text"]) and math.isnan(a["judge_text_zero"])
    coverage = judge_coverage(cube).set_index("evaluator").loc["j1"]
    assert coverage["n_error"] == 2 and coverage["n_rows_examples"] == 0
    assert not coverage["excluded_valid_only"]  # it did not answer: nothing to exclude
    means = cell_means(cube)
    assert int(means[means["evaluator"] == "j1"]["n_error"].iloc[0]) == 2


def test_bootstrap_point_estimate_follows_the_same_rule():
    _, cube = _table()
    lb = leaderboard(cube).set_index("system")
    result = paired_bootstrap(cube, draws=50, seed=1, policy="zero")
    point = dict(zip(result.systems, result.point["total"], strict=True))
    for system, total in point.items():
        assert abs(total - lb.loc[system, "total_zero"]) < 1e-9
    assert np.isfinite(result.replicates["total"]).any()
