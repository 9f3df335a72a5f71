"""The leaderboard against hand-computed values (Appendix E.5 and F.4), to 1e-12."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from analysis_helpers import bert, clip, cube_of, judge, meta
from omnistory_report.analysis import (
    LEADERBOARD_COLUMNS,
    criterion_scores,
    judge_coverage,
    leaderboard,
    modality_frame,
)

TOL = 1e-12
MISSING = "missing_output"


def _hand_table():
    """System A: missing outputs, invalid records, a judge with no valid example, partial rows.

    System B: a partial sweep (no e3 rows at all, no CLIP and no omni judge yet, one judge not run).
    """
    a = [
        bert("A", "e1", 0.9),
        bert("A", "e2", 0.6),
        bert("A", "e3", None, MISSING),
        clip("A", "e1", 0.5),
        clip("A", "e2", None, MISSING),
        clip("A", "e3", 0.0),
        meta("A", "e1", [1, 1, 0, 1]),
        meta("A", "e2", [1, 0, None, 1]),
        meta("A", "e3", None, MISSING),
        judge("A", "e1", "text", "tj1", [8, 6, 7, 9]),
        judge("A", "e2", "text", "tj1", [5, 5, 5, 5]),
        judge("A", "e3", "text", "tj1", None, MISSING),
        judge("A", "e1", "text", "tj2", [10, None, 10, 10]),
        judge("A", "e2", "text", "tj2", [4, 4, 4, 2]),
        judge("A", "e3", "text", "tj2", None, MISSING),
        judge("A", "e1", "image", "ij1", [6, 6, 6, 6]),
        judge("A", "e2", "image", "ij1", None, MISSING),
        judge("A", "e3", "image", "ij1", [2, 3, 4, 5]),
        # ij2: run on A, never valid -> left out of the valid-only mean, 0 when zero-filled
        judge("A", "e1", "image", "ij2", [None, None, None, None]),
        judge("A", "e2", "image", "ij2", None, MISSING),
        judge("A", "e3", "image", "ij2", [7, None, 7, 7]),
        judge("A", "e1", "speech", "sj1", [7, 7, 7, 7]),
        judge("A", "e2", "speech", "sj1", [9, 8, 7, 6]),
        judge("A", "e3", "speech", "sj1", None, MISSING),
        judge("A", "e1", "omni", "oj1", [5, 6, 7, 8]),
        judge("A", "e2", "omni", "oj1", None, MISSING),
        judge("A", "e3", "omni", "oj1", None, MISSING),
        # oj2: a partial record (three of four criteria written so far)
        judge("A", "e1", "omni", "oj2", [9, 9, 9]),
    ]
    b = [
        bert("B", "e1", 0.8),
        bert("B", "e2", 0.7),
        meta("B", "e1", [1, 1, 1, 1]),
        meta("B", "e2", [0, 0, 0, 0]),
        judge("B", "e1", "text", "tj1", [6, 6, 6, 6]),
        judge("B", "e2", "text", "tj1", [8, 8, 8, 8]),
        judge("B", "e1", "image", "ij1", [5, 5, 5, 5]),
        judge("B", "e1", "speech", "sj1", [3, 3, 3, 3]),
        judge("B", "e2", "speech", "sj1", [4, 4, 4, 4]),
    ]
    return cube_of(a + b)


def test_columns_are_exactly_the_contract():
    _, cube = _hand_table()
    assert tuple(leaderboard(cube).columns) == LEADERBOARD_COLUMNS


def test_valid_only_hand_computed():
    _, cube = _hand_table()
    lb = leaderboard(cube).set_index("system")
    a = lb.loc["A"]
    assert a["n_examples"] == 3
    assert abs(a["bertscore"] - 0.75) < TOL
    assert abs(a["clip"] - 0.25) < TOL  # the observed valid zero on e3 stays in
    assert abs(a["speech_meta"] - 0.75) < TOL  # e2 has an invalid field -> excluded
    assert abs(a["judge_text"] - (6.25 + 3.5) / 2) < TOL
    assert abs(a["judge_image"] - 4.75) < TOL  # ij2 has no valid example: left out
    assert abs(a["judge_speech"] - 7.25) < TOL
    assert abs(a["judge_omni"] - 6.5) < TOL  # oj2's partial record is not valid
    total = (7.5 + 2.5 + 7.5 + 4.875 + 4.75 + 7.25 + 6.5) / 7
    assert abs(a["total"] - total) < TOL
    assert abs(a["text_score"] - (7.5 + 4.875) / 2) < TOL
    assert abs(a["image_score"] - (2.5 + 4.75) / 2) < TOL
    assert abs(a["speech_score"] - (7.5 + 7.25) / 2) < TOL
    assert abs(a["traditional_total"] - 10 / 3 * (0.75 + 0.25 + 0.75)) < TOL
    assert (a["missing_text"], a["missing_image"], a["missing_speech"]) == (1, 1, 1)


def test_zero_filled_hand_computed():
    _, cube = _hand_table()
    a = leaderboard(cube).set_index("system").loc["A"]
    assert abs(a["bertscore_zero"] - 1.5 / 3) < TOL
    assert abs(a["clip_zero"] - 0.5 / 3) < TOL
    assert abs(a["speech_meta_zero"] - 0.75 / 3) < TOL
    assert abs(a["judge_text_zero"] - (12.5 / 3 + 3.5 / 3) / 2) < TOL
    assert abs(a["judge_image_zero"] - (9.5 / 3 + 0.0) / 2) < TOL  # ij2 counts as 0
    assert abs(a["judge_speech_zero"] - 14.5 / 3) < TOL
    assert abs(a["judge_omni_zero"] - (6.5 / 3 + 0.0) / 2) < TOL
    total_zero = (
        10 * 1.5 / 3 + 10 * 0.5 / 3 + 10 * 0.75 / 3 + 16 / 6 + 9.5 / 6 + 14.5 / 3 + 6.5 / 6
    ) / 7
    assert abs(a["total_zero"] - total_zero) < TOL


def test_partial_sweep_system():
    _, cube = _hand_table()
    lb = leaderboard(cube)
    assert list(lb["system"]) == ["A", "B"]  # undefined totals sort last
    b = lb.set_index("system").loc["B"]
    assert b["n_examples"] == 2
    assert abs(b["bertscore"] - 0.75) < TOL and abs(b["bertscore_zero"] - 0.75) < TOL
    assert math.isnan(b["clip"]) and math.isnan(b["clip_zero"])  # CLIP not run yet
    assert abs(b["speech_meta"] - 0.5) < TOL  # a valid all-wrong prediction scores 0
    assert abs(b["judge_text"] - 7.0) < TOL  # tj2 was not run on B: not part of B's mean
    assert abs(b["judge_text_zero"] - 7.0) < TOL
    assert abs(b["judge_image"] - 5.0) < TOL and abs(b["judge_image_zero"] - 2.5) < TOL
    assert math.isnan(b["judge_omni"]) and math.isnan(b["total"])
    assert abs(b["text_score"] - 7.25) < TOL
    assert abs(b["speech_score"] - (5.0 + 3.5) / 2) < TOL
    assert math.isnan(b["image_score"]) and math.isnan(b["traditional_total"])


def test_judge_coverage_reports_judges_without_valid_examples():
    _, cube = _hand_table()
    cov = judge_coverage(cube)
    excluded = cov[cov["excluded_valid_only"]]
    assert set(zip(excluded["system"], excluded["evaluator"], strict=True)) == {
        ("A", "ij2"),
        ("A", "oj2"),
    }
    row = cov[(cov["system"] == "A") & (cov["evaluator"] == "tj2")].iloc[0]
    assert row["n_valid"] == 1 and row["n_rows_examples"] == 3


def test_criterion_scores_use_judge_valid_sets_and_equal_weights():
    frame, cube = _hand_table()
    crit = criterion_scores(frame, cube, "text")
    # tj1 valid on e1, e2: c1 (8+5)/2; tj2 valid on e2 only: c1 4 -> equal weight.
    assert abs(crit.loc["A", "c1"] - ((8 + 5) / 2 + 4) / 2) < TOL
    assert abs(crit.loc["A", "c4"] - ((9 + 5) / 2 + 2) / 2) < TOL
    # The mean of the four criterion-level scores is the track score.
    assert (
        abs(crit.loc["A"].mean() - leaderboard(cube).set_index("system").loc["A", "judge_text"])
        < TOL
    )


def test_modality_frame_matches_leaderboard():
    _, cube = _hand_table()
    lb = leaderboard(cube)
    mod = modality_frame(lb, "zero")
    a = lb.set_index("system").loc["A"]
    assert abs(mod.loc["A", "text"] - (10 * a["bertscore_zero"] + a["judge_text_zero"]) / 2) < TOL
    assert abs(mod.loc["A", "total"] - a["total_zero"]) < TOL


def _generation_failure_table(n: int, failed: int, seed: int, extra_invalid: bool = False):
    """One system, ``failed`` examples with all three outputs missing, random valid scores."""
    rng = np.random.default_rng(seed)
    groups = []
    for i in range(n):
        e = f"e{i:03d}"
        if i < failed:
            groups += [
                bert("S", e, None, MISSING),
                clip("S", e, None, MISSING),
                meta("S", e, None, MISSING),
            ]
            for track in ("text", "image", "speech", "omni"):
                for j in range(3):
                    groups.append(judge("S", e, track, f"{track}{j}", None, MISSING))
            continue
        groups += [
            bert("S", e, float(rng.uniform(0.8, 0.9))),
            clip("S", e, float(rng.uniform(0.5, 0.9))),
            meta("S", e, list(rng.integers(0, 2, 4).astype(float))),
        ]
        for track in ("text", "image", "speech", "omni"):
            for j in range(3):
                scores = list(rng.integers(1, 11, 4).astype(float))
                if extra_invalid and i == failed and j == 0:
                    scores[2] = None  # an evaluator failure on an available output
                groups.append(judge("S", e, track, f"{track}{j}", scores))
    return cube_of(groups)[1]


def test_zero_filled_equals_valid_times_coverage_for_generation_failures():
    cube = _generation_failure_table(900, 187, seed=3)
    row = leaderboard(cube).iloc[0]
    coverage = 713 / 900
    for col in ("bertscore", "clip", "speech_meta", "judge_text", "judge_omni", "total"):
        assert abs(row[f"{col}_zero"] - row[col] * coverage) < TOL
    # The paper's own arithmetic for MMaDA–P (Table 14): 5.3742 x 713/900 = 4.25756 ≈ 4.2574;
    # the printed zero-filled value is slightly lower because some evaluations were also invalid.
    assert abs(5.3742 * coverage - 4.2574) < 2e-4
    assert 5.3742 * coverage >= 4.2574


def test_an_invalid_evaluation_lowers_zero_filled_below_valid_times_coverage():
    cube = _generation_failure_table(900, 187, seed=3, extra_invalid=True)
    row = leaderboard(cube).iloc[0]
    assert row["total_zero"] < row["total"] * 713 / 900 - 1e-9


def test_constant_scores_reproduce_table14_value():
    """Constant per-example scores with total 5.3742 and 187/900 plan failures give 4.25756."""
    groups = []
    # 10b + 10c + 10m + 4 j = 7 * 5.3742 with b=c=m=0.5 -> j = (37.6194 - 15) / 4
    j = (7 * 5.3742 - 15) / 4
    for i in range(900):
        e = f"e{i:03d}"
        ok = i >= 187
        groups += [
            bert("M", e, 0.5 if ok else None, None if ok else MISSING),
            clip("M", e, 0.5 if ok else None, None if ok else MISSING),
        ]
        groups.append(meta("M", e, [1, 0, 1, 0] if ok else None, None if ok else MISSING))
        for track in ("text", "image", "speech", "omni"):
            groups.append(
                judge("M", e, track, "j", [j] * 4 if ok else None, None if ok else MISSING)
            )
    row = leaderboard(cube_of(groups)[1]).iloc[0]
    assert row["total"] == pytest.approx(5.3742, abs=TOL)
    assert row["total_zero"] == pytest.approx(5.3742 * 713 / 900, abs=TOL)
    assert round(row["total_zero"], 3) == 4.258
    assert (row["missing_text"], row["missing_image"], row["missing_speech"]) == (187, 187, 187)


def test_empty_cube_gives_empty_leaderboard():
    _, cube = cube_of([])
    lb = leaderboard(cube)
    assert isinstance(lb, pd.DataFrame) and lb.empty
    assert tuple(lb.columns) == LEADERBOARD_COLUMNS
