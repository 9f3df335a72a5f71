"""Integrated-judge categories (F.3), DreamSim (F.2), BERTScore vs text judge (F.1) and speech
metadata accuracy per field (E.1): Tables 7-9, 11, 12, 31 and 32 against hand-computed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_helpers import cube_of, judge, meta
from omnistory_report.analysis.automatic import (
    bertscore_text_judge_agreement,
    speech_accuracy_table,
    speech_field_accuracy,
)
from omnistory_report.analysis.categories import (
    category_diagnostics,
    category_partials,
    integrated_correlations,
    paradigm_category_means,
)
from omnistory_report.analysis.dreamsim import dreamsim_correlations, dreamsim_per_system
from omnistory_report.analysis.leaderboard import criterion_scores

from omnistory_core.scores import ScoreRow


def _omni_categories():
    groups = [
        judge("s1", "e1", "omni", "oj", [8, 6, 4, 2]),
        judge("s1", "e2", "omni", "oj", [6, 6, 6, 6]),
        judge("s2", "e1", "omni", "oj", [9, 9, 9, 9]),
        judge("s2", "e2", "omni", "oj", [9, 9, None, 9]),  # invalid: out of s2's means
        judge("s3", "e1", "omni", "oj", [4, 2, 2, 4]),
        judge("s3", "e2", "omni", "oj", None, status="error"),  # could not answer: left out
        judge("s4", "e1", "omni", "oj", None, status="missing_output"),  # no valid example
    ]
    frame, cube = cube_of(groups)
    return criterion_scores(frame, cube, "omni")


def test_category_scores_use_valid_examples_only():
    cats = _omni_categories()
    assert list(cats.loc["s1"]) == [7, 6, 5, 4]
    assert list(cats.loc["s2"]) == [9, 9, 9, 9]
    assert list(cats.loc["s3"]) == [4, 2, 2, 4]
    assert cats.loc["s4"].isna().all()


def test_table11_category_diagnostics_by_hand():
    table = category_diagnostics(_omni_categories()).set_index("category")
    assert (table["n_systems"] == 3).all()  # s4 has no valid example
    c1 = table.loc["c1"]  # 7, 9, 4
    assert c1["mean"] == pytest.approx(20 / 3)
    # squared deviations (1/3)^2 + (7/3)^2 + (8/3)^2 = 114/9, over n - 1 = 2
    assert c1["sd"] == pytest.approx(np.sqrt(114 / 9 / 2))
    assert c1["iqr"] == pytest.approx(8.0 - 5.5)  # h = 2.5 and 1.5 on 4, 7, 9
    # losses 10 - score: c1 3+1+6, c2 4+1+8, c3 5+1+8, c4 6+1+6 -> 10, 13, 14, 13 of 50
    assert list(table["loss_share"]) == pytest.approx([0.2, 0.26, 0.28, 0.26])
    # lowest: s1 -> c4; s2 ties all four; s3 ties c2 and c3
    assert list(table["n_lowest"]) == [1, 2, 2, 2]


def test_table12_category_partials_by_hand():
    idx = pd.Index(["s1", "s2", "s3", "s4", "s5", "s6"], name="system")
    modalities = pd.DataFrame(
        {
            "text": [1.0, 2.0, 3.0, 4.0, 6.0, 5.0],
            "image": [2.0, 1.0, 4.0, 3.0, 5.0, 1.0],
            "speech": [1.0, 3.0, 2.0, 5.0, 4.0, 2.0],
        },
        index=idx,
    )
    cats = pd.DataFrame({"c1": modalities["text"] + modalities["image"]}, index=idx)
    cats.loc["s6", "c1"] = np.nan  # no valid integrated example: left out
    table = category_partials(cats, modalities).set_index("modality")
    assert (table["n"] == 5).all()
    # c1 = text + image: controlling for image and speech its residual is text's residual
    assert table.loc["text", "r"] == pytest.approx(1.0)
    assert table.loc["text", "controls"] == "image,speech"
    assert table.loc["image", "r"] == pytest.approx(1.0)
    assert table.loc["text", "p"] < 1e-6  # t-test with 5 - 2 - 2 = 1 degree of freedom


def test_figure12a_paradigm_means():
    cats = _omni_categories()
    means = paradigm_category_means(cats, {"s1": "orchestration", "s2": "orchestration"})
    means = means.set_index("paradigm")
    assert means.loc["orchestration", "c1"] == pytest.approx(8.0)
    assert means.loc["orchestration", "n_systems"] == 2
    assert means.loc["unknown", "c2"] == pytest.approx(2.0)  # s3; s4 has no scores
    assert list(paradigm_category_means(cats)["paradigm"]) == ["all"]


def test_table9_integrated_correlations_by_hand():
    idx = pd.Index(["s1", "s2", "s3"], name="system")
    modalities = pd.DataFrame(
        {
            "text": [1.0, 2.0, 3.0],
            "image": [3.0, 2.0, 1.0],
            "speech": [1.0, 3.0, 2.0],
            "omni": [3.0, 5.0, 7.0],
        },
        index=idx,
    )
    dreamsim = pd.Series({"s1": 0.5, "s2": 0.3})  # s3 has no valid image
    table = integrated_correlations(modalities, dreamsim).set_index("y")
    assert table.loc["text", "r"] == pytest.approx(1.0)
    assert table.loc["image", "r"] == pytest.approx(-1.0)
    assert table.loc["speech", "r"] == pytest.approx(0.5)
    # r = 0.5, one degree of freedom: t = 1/sqrt(3), p = 2 (1/2 - atan(t)/pi) = 2/3
    assert table.loc["speech", "p"] == pytest.approx(2 / 3)
    assert table.loc["dreamsim", "n"] == 2 and table.loc["dreamsim", "r"] == pytest.approx(-1.0)
    assert np.isnan(table.loc["dreamsim", "p"])
    assert "dreamsim" not in set(integrated_correlations(modalities)["y"])


def _dreamsim_frame():
    def row(s, e, score, status="ok"):
        return ScoreRow(s, e, "metric", "image", "dreamsim", "distance", score, status)

    rows = [
        row("s1", "e1", 0.2),
        row("s1", "e2", 0.4),
        row("s1", "e3", None, "missing_output"),
        row("s2", "e1", 0.5),
        row("s2", "e2", None, "invalid"),
        row("s2", "e3", None, "error"),
        row("s3", "e1", 0.1),
        row("s3", "e2", 0.3),
        row("s3", "e3", 0.5),
    ]
    frame, _ = cube_of([rows])
    return frame


def test_table32_dreamsim_per_system_by_hand():
    table = dreamsim_per_system(_dreamsim_frame()).set_index("system")
    assert list(table["n_valid"]) == [2, 1, 3]
    assert list(table["n_missing"]) == [1, 0, 0]
    assert list(table["n_invalid"]) == [0, 1, 0]
    assert list(table["n_error"]) == [0, 1, 0]
    assert list(table["mean_distance"]) == pytest.approx([0.3, 0.5, 0.3])
    # population SD over valid images
    assert list(table["sd_population"]) == pytest.approx([0.1, 0.0, np.sqrt(0.08 / 3)])


def test_table8_dreamsim_correlations_by_hand():
    per_system = dreamsim_per_system(_dreamsim_frame())  # means 0.3, 0.5, 0.3
    lb = pd.DataFrame(
        {
            "system": ["s1", "s2", "s3"],
            "clip": [0.9, 0.5, 0.7],
            "judge_image": [8.0, 4.0, 6.0],
            "image_score": [1.0, 2.0, 3.0],
            "judge_omni": [5.0, 5.0, 5.0],
            "total": [np.nan, 6.0, 7.0],
        }
    )
    cats = pd.DataFrame({"c1": [7.0, 3.0, 5.0]}, index=pd.Index(["s1", "s2", "s3"]))
    table = dreamsim_correlations(per_system, lb, cats).set_index("score")
    assert table.loc["clip", "r"] == pytest.approx(-np.sqrt(3) / 2)
    # t = -sqrt(3) with one degree of freedom: p = 2 (1/2 - atan(sqrt 3)/pi) = 1/3
    assert table.loc["clip", "p"] == pytest.approx(1 / 3)
    assert table.loc["judge_image", "r"] == pytest.approx(-np.sqrt(3) / 2)
    assert table.loc["image_score", "r"] == pytest.approx(0.0, abs=1e-12)
    assert np.isnan(table.loc["judge_omni", "r"])  # constant
    assert table.loc["total", "n"] == 2 and table.loc["total", "r"] == pytest.approx(-1.0)
    assert table.loc["image:c1", "r"] == pytest.approx(-np.sqrt(3) / 2)


def test_table7_bertscore_vs_text_judge_by_hand():
    lb = pd.DataFrame(
        {
            "system": ["s1", "s2", "s3", "s4"],
            "bertscore": [0.80, 0.85, 0.90, 0.95],
            "judge_text": [3.0, 5.0, 4.0, np.nan],  # s4: no valid text-judge example
        }
    )
    row = bertscore_text_judge_agreement(lb).iloc[0]
    assert row["n_systems"] == 3
    assert row["pearson_r"] == pytest.approx(0.5)
    assert row["spearman_rho"] == pytest.approx(0.5)
    assert row["pearson_p"] == pytest.approx(2 / 3)
    assert row["spearman_p"] == pytest.approx(2 / 3)
    assert (row["bertscore_x10_min"], row["bertscore_x10_max"]) == pytest.approx((8.0, 9.0))
    assert (row["judge_text_min"], row["judge_text_max"]) == (3.0, 5.0)


def test_table31_speech_field_accuracy_by_hand():
    groups = [
        meta("s1", "e1", [1, 1, 1, 1]),
        meta("s1", "e2", [1, 0, 1, 0]),
        meta("s1", "e3", [1, None, 1, 1]),  # invalid: one field without a prediction
        meta("s1", "e4", None, status="error"),  # classifier could not run
        meta("s2", "e1", [0, 0, 0, 0]),  # a valid zero stays
        meta("s2", "e2", None, status="missing_output"),
        meta("s3", "e1", None, status="missing_output"),
    ]
    frame, cube = cube_of(groups)
    per = speech_field_accuracy(frame, cube).set_index("system")
    assert list(per["n_valid"]) == [2, 1, 0]
    assert list(per.loc["s1", ["emotion", "speed", "pitch", "gender"]]) == [1.0, 0.5, 1.0, 0.5]
    assert per.loc["s1", "exact_match"] == 0.5 and per.loc["s1", "mean"] == 0.75
    assert per.loc["s2", "exact_match"] == 0.0 and per.loc["s2", "mean"] == 0.0
    assert per.loc["s3"][["emotion", "exact_match"]].isna().all()

    table = speech_accuracy_table(per.reset_index(), {"s1": "orchestration", "s2": "any-to-any"})
    table = table.set_index("group")
    everyone = table.loc["all systems"]
    assert everyone["n_systems"] == 2  # s3 has no valid prediction
    assert list(everyone[["emotion_pct", "speed_pct", "pitch_pct", "gender_pct"]]) == [
        50.0,
        25.0,
        50.0,
        25.0,
    ]
    assert everyone["exact_match_pct"] == 25.0 and everyone["mean_pct"] == 37.5
    assert table.loc["orchestration", "speed_pct"] == 50.0
    assert table.loc["any-to-any", "n_systems"] == 1
