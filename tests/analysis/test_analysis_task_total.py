"""The leaderboard's Total Average comes from the task's declared columns and scales."""

from __future__ import annotations

import numpy as np
from omnistory_report.analysis.leaderboard import COMPONENTS, total_average

from omnistory_core.builtin.omnistorybench import OMNISTORYBENCH


def test_components_are_the_tasks_columns_in_order() -> None:
    assert COMPONENTS == (
        "bertscore",
        "clip",
        "speech_meta",
        "judge_text",
        "judge_image",
        "judge_speech",
        "judge_omni",
    )
    assert [c.scale for c in OMNISTORYBENCH.aggregation.columns] == [10.0] * 3 + [1.0] * 4


def test_total_average_is_the_papers_formula_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    comps = rng.random((7, 500)) * np.array([1, 1, 1, 10, 10, 10, 10])[:, None]
    comps[2, 3] = np.nan  # a system without speech scores has no total
    bert, clip, meta, jt, ji, js, jo = comps
    paper = (10 * bert + 10 * clip + 10 * meta + jt + ji + js + jo) / 7
    assert np.array_equal(total_average(comps), paper, equal_nan=True)
    assert np.isnan(total_average(comps)[3])
