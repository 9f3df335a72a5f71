"""Judge agreement (Appendix F.6): system level, jointly valid items, panels."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_helpers import bert, clip, cube_of, judge, meta
from omnistory_report.analysis.agreement import (
    default_panels,
    judge_calibration,
    judge_item_agreement,
    judge_system_agreement,
    panel_agreement,
    panel_scores,
)


def _table():
    # Four systems; judge a ranks them 1 < 2 < 3 < 4, judge b swaps the first two.
    groups = []
    a_means = {"s1": 1.0, "s2": 2.0, "s3": 3.0, "s4": 4.0}
    b_means = {"s1": 3.0, "s2": 2.0, "s3": 5.0, "s4": 6.0}
    for s in a_means:
        for e in ("e1", "e2"):
            groups.append(judge(s, e, "text", "ja", [a_means[s]] * 4))
            groups.append(judge(s, e, "text", "jb", [b_means[s]] * 4))
        # an item only judge b scored validly: left out of the item-level comparison
        groups.append(judge(s, "e3", "text", "ja", [None] * 4))
        groups.append(judge(s, "e3", "text", "jb", [9.0] * 4))
    return cube_of(groups)


def test_system_level_spearman_and_kendall_tau_b():
    _, cube = _table()
    table = judge_system_agreement(cube)
    row = table.iloc[0]
    assert (row["judge_a"], row["judge_b"], row["n_systems"]) == ("ja", "jb", 4)
    # judge b's means include e3 (9.0): s1 5.0, s2 4.33, s3 6.33, s4 7 -> ranks 2,1,3,4
    assert row["spearman"] == pytest.approx(0.8, abs=1e-12)
    assert row["kendall_tau_b"] == pytest.approx(4 / 6, abs=1e-12)
    # on jointly valid examples only (e1, e2) the means are 3, 2, 5, 6 -> same ranks
    assert row["spearman_jointly_valid"] == pytest.approx(0.8, abs=1e-12)


def test_item_level_uses_jointly_valid_items():
    _, cube = _table()
    row = judge_item_agreement(cube).iloc[0]
    assert row["n_items"] == 8
    assert row["mae"] == pytest.approx(np.mean([2, 2, 0, 0, 2, 2, 2, 2]), abs=1e-12)
    assert row["mean_a"] == pytest.approx(2.5) and row["mean_b"] == pytest.approx(4.0)


PANEL_A = {
    "text": "text-qwen3-30b-a3b",
    "image": "image-qwen3-vl-32b",
    "speech": "speech-audio-flamingo-next",
    "omni": "omni-qwen3-omni-30b",
}
PANEL_B = {
    "text": "text-seed-oss-36b",
    "image": "image-internvl35-38b",
    "speech": "speech-moss-audio-8b",
    "omni": "omni-nemotron3-nano-omni",
}


def _panel_table(b_first: bool = False):
    groups = []
    for i, s in enumerate(("s1", "s2", "s3", "s4")):
        e = "e1"
        groups += [bert(s, e, 0.8), clip(s, e, 0.7), meta(s, e, [1, 0, 1, 0])]
        for track in ("text", "image", "speech", "omni"):
            a = judge(s, e, track, PANEL_A[track], [float(i + 1)] * 4)
            b = judge(s, e, track, PANEL_B[track], [float(4 - i)] * 4)
            groups += [b, a] if b_first else [a, b]
    return cube_of(groups)


def test_default_panels_and_panel_agreement():
    _, cube = _panel_table()
    panels = default_panels(cube)
    assert panels == {"A": PANEL_A, "B": PANEL_B}
    scores = panel_scores(cube)
    assert scores["A"].loc["s1", "composite"] == pytest.approx(1.0)
    assert scores["A"].loc["s1", "total"] == pytest.approx((8 + 7 + 5 + 4 * 1.0) / 7)
    table = panel_agreement(cube).set_index("measure")
    assert table.loc["text", "spearman"] == pytest.approx(-1.0)
    assert table.loc["total", "kendall_tau_b"] == pytest.approx(-1.0)


def test_panels_follow_the_fixed_f6_membership_not_the_run_order():
    # panel B's judges appear first in the scores table: they still form panel B
    _, cube = _panel_table(b_first=True)
    assert cube.cells[3].evaluator == PANEL_B["text"]  # first text judge of the table
    assert default_panels(cube) == {"A": PANEL_A, "B": PANEL_B}
    scores = panel_scores(cube)
    assert scores["A"].loc["s1", "composite"] == pytest.approx(1.0)
    assert scores["B"].loc["s1", "composite"] == pytest.approx(4.0)


def test_partial_panels_keep_the_judges_they_have():
    groups = [
        judge("s", "e", "text", "text-llama-nemotron-49b", [1] * 4),  # panel C
        judge("s", "e", "omni", "omni-qwen3-omni-30b", [1] * 4),  # panel A
        judge("s", "e", "text", "my-own-judge", [1] * 4),  # in no panel
    ]
    _, cube = cube_of(groups)
    assert default_panels(cube) == {
        "A": {"omni": "omni-qwen3-omni-30b"},
        "C": {"text": "text-llama-nemotron-49b"},
    }
    scores = panel_scores(cube)
    assert np.isnan(scores["A"].loc["s", "text"]) and np.isnan(scores["A"].loc["s", "composite"])


def test_panels_undefined_without_paper_judges():
    groups = [
        judge("s", "e", "text", "t1", [1] * 4),
        judge("s", "e", "text", "t2", [1] * 4),
        judge("s", "e", "image", "i1", [1] * 4),
    ]
    _, cube = cube_of(groups)
    assert default_panels(cube) == {}


def test_judge_calibration():
    _, cube = _panel_table()
    cal = judge_calibration(cube).set_index("judge")
    assert cal.loc[PANEL_A["text"], "mean"] == pytest.approx(2.5)
    assert cal.loc[PANEL_A["text"], "sd_between_systems"] == pytest.approx(
        np.std([1, 2, 3, 4], ddof=1)
    )
