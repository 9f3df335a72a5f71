"""Krippendorff's alpha against the textbook example, and the human tables on in-memory rows."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from omnistory_eval.judges.rubric import CRITERIA
from omnistory_report.analysis.cube import build_cube
from omnistory_report.analysis.frame import frame_from_rows, load_scores_frame
from omnistory_report.analysis.human import (
    HumanStudy,
    human_tables,
    krippendorff_alpha,
    split_human,
)
from omnistory_report.analysis.leaderboard import leaderboard

from omnistory_core.scores import ScoreRow, write_scores

NAN = math.nan
# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the 4 coders x 12 units
# example with missing values; published: nominal .743, ordinal .815, interval .849, ratio .797
RELIABILITY = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]


def _units(matrix: list[list[float]]) -> list[list[float]]:
    return [[row[u] for row in matrix if not math.isnan(row[u])] for u in range(len(matrix[0]))]


@pytest.mark.parametrize(
    ("level", "published"),
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_alpha_reproduces_the_textbook_example(level: str, published: float) -> None:
    assert krippendorff_alpha(_units(RELIABILITY), level) == pytest.approx(published, abs=5e-4)


def test_alpha_edge_cases() -> None:
    assert krippendorff_alpha([[3, 3], [5, 5], [7, 7, 7]]) == 1.0
    # every unit disagrees: o = [[0, 2], [2, 0]], n = 4 -> alpha = 1 - (4 - 1) * 4 / 8 = -0.5
    assert krippendorff_alpha([[1, 2], [2, 1]], "nominal") == pytest.approx(1 - 3 * 4 / (2 * 4))
    assert math.isnan(krippendorff_alpha([[4], [6], [8]]))  # nothing pairable
    assert math.isnan(krippendorff_alpha([[5, 5], [5, 5]]))  # no variation at all
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha([[1, 2]], "cardinal")


def _judge_rows(system: str, example: str, score: float) -> list[ScoreRow]:
    return [
        ScoreRow(system, example, "judge", t, f"j-{t}", c, score, "ok")
        for t in CRITERIA
        for c in CRITERIA[t]
    ]


def _human_rows(system: str, example: str, who: str, score: float | None) -> list[ScoreRow]:
    status = "ok" if score is not None else "invalid"
    return [
        ScoreRow(
            system, example, "human", "text", who, c, score, status, None if score else "skipped"
        )
        for c in CRITERIA["text"]
    ]


def test_human_rows_never_enter_the_cube_and_load_through_the_contract(tmp_path) -> None:
    judged = [r for s, v in (("A", 5), ("B", 6)) for r in _judge_rows(s, "e1", v)]
    human = _human_rows("A", "e1", "annotator:1", 9) + _human_rows("H", "e2", "annotator:1", 3)
    path = tmp_path / "scores.jsonl"
    write_scores(path, judged + human)
    frame = load_scores_frame(path)
    assert (frame["kind"] == "human").sum() == 8
    rest, only_human = split_human(frame)
    assert len(rest) == len(judged) and len(only_human) == 8
    with_human, without = build_cube(frame), build_cube(rest)
    assert with_human.systems == without.systems == ("A", "B")  # "H" has human rows only
    assert with_human.examples == ("e1",)
    np.testing.assert_array_equal(with_human.values, without.values)


def test_tables_without_a_plan_and_with_an_oracle_left_out() -> None:
    # judges: A 5, B 6, C 7, O 9; humans: A 6, B 8, C 7 (annotator 1) and O 10; one skip
    judges = [
        r for s, v in (("A", 5), ("B", 6), ("C", 7), ("O", 9)) for r in _judge_rows(s, "e1", v)
    ]
    human = [
        *_human_rows("A", "e1", "annotator:1", 6),
        *_human_rows("B", "e1", "annotator:1", 8),
        *_human_rows("C", "e1", "annotator:1", 7),
        *_human_rows("C", "e1", "annotator:2", None),
        *_human_rows("O", "e1", "annotator:1", 10),
    ]
    frame, human_frame = split_human(frame_from_rows(judges + human))
    cube = build_cube(frame)
    lb = leaderboard(cube)
    tables = human_tables(HumanStudy(human_frame), cube, lb, exclude=["O"])
    t18 = tables[18]
    assert not isinstance(t18, str)
    text = t18.frame.set_index("track").loc["text"]
    assert math.isnan(text["planned_items"])  # no plan: planned items unknown
    assert text["submitted"] == 5 and text["scored"] == 4 and text["skipped_or_unscored"] == 1
    assert text["system_track_cells"] == 4 and text["mean_scored_per_cell"] == 1.0
    assert "No study plan" in t18.note
    t19 = tables[19]
    assert not isinstance(t19, str)
    row = t19.frame.set_index("measure").loc["text"]
    # O left out: human 6, 8, 7 vs judges 5, 6, 7 -> ranks 1 3 2 vs 1 2 3: rho = 1 - 6*2/24
    assert row["n_systems"] == 3
    assert row["spearman"] == pytest.approx(0.5)
    assert row["kendall_tau_b"] == pytest.approx(1 / 3)
    assert tables[20] == "no paradigms known"
    t21 = tables[21]
    assert not isinstance(t21, str)
    assert t21.frame.set_index("track").loc["text", "pairable_items"] == 0


def test_import_of_a_real_label_studio_export(tmp_path) -> None:
    """An export written by Label Studio 1.23.2 itself (project from `human export`'s
    project.json, tasks.json imported through the API, 7 tasks rated, 1 skipped; the item HTML is
    left out of the fixture)."""
    from omnistory_report.human.import_ import import_ratings

    from omnistory_core.scores import read_scores

    data = Path(__file__).parent / "data"
    scores = tmp_path / "scores.jsonl"
    summary = import_ratings(
        data / "labelstudio_1.23.2_export.json", scores, data / "labelstudio_1.23.2_plan.json"
    )
    assert (summary.tasks, summary.submitted, summary.scored, summary.skipped) == (8, 8, 7, 1)
    rows = list(read_scores(scores))
    assert len(rows) == 32 and {r.evaluator for r in rows} == {"annotator:1"}
    assert sorted({r.score for r in rows if r.status == "ok"}) == [
        3.0,
        4.0,
        5.0,
        6.0,
        7.0,
        8.0,
        9.0,
    ]
    skipped = [r for r in rows if r.status == "invalid"]
    assert len(skipped) == 4 and {r.cause for r in skipped} == {"skipped"}
    assert {r.track for r in rows} == {"text", "image", "speech", "omni"}
