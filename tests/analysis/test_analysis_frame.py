"""Loading scores.jsonl: the fast path agrees with read_scores; bad input names file/line/field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from analysis_helpers import bert, cube_of, judge
from omnistory_report.analysis import build_cube, load_scores_frame
from omnistory_report.analysis.synthetic import synthetic_scores, write_scores_frame

from omnistory_core.scores import read_scores, write_scores

GOOD = {
    "system": "s",
    "example_id": "e1",
    "kind": "metric",
    "track": "text",
    "evaluator": "bertscore",
    "criterion": "f1",
    "score": 0.5,
    "status": "ok",
}


def _write(path: Path, records: list[dict | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_fast_path_matches_read_scores(tmp_path):
    frame = synthetic_scores(n_systems=5, n_examples=30, judges_per_track=2, seed=1)
    path = write_scores_frame(frame, tmp_path / "scores.jsonl")
    loaded = load_scores_frame(path)
    rows = list(read_scores(path))
    assert len(loaded) == len(rows) == len(frame)
    np.testing.assert_array_equal(
        loaded["score"].to_numpy(), np.array([np.nan if r.score is None else r.score for r in rows])
    )
    assert list(loaded["status"].astype(str)) == [r.status for r in rows]
    assert set(loaded["status"].astype(str)) == {"ok", "missing_output", "invalid"}


def test_integer_scores_and_blank_lines(tmp_path):
    rows = [dict(GOOD, score=1), "", dict(GOOD, example_id="e2", score=None, status="invalid")]
    frame = load_scores_frame(_write(tmp_path / "s.jsonl", rows))
    assert frame["score"].dtype == np.float64
    assert frame["score"].iloc[0] == 1.0 and np.isnan(frame["score"].iloc[1])


def test_written_by_the_contract_writer(tmp_path):
    path = tmp_path / "s.jsonl"
    write_scores(
        path,
        [r for g in (bert("a", "e", 0.7), judge("a", "e", "text", "j", [1, 2, 3, 4])) for r in g],
    )
    frame = load_scores_frame(path)
    cube = build_cube(frame)
    assert cube.systems == ("a",) and len(cube.cells) == 2


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({k: v for k, v in GOOD.items() if k != "criterion"}, "lacks field 'criterion'"),
        (dict(GOOD, status="fine"), "status must be one of"),
        (dict(GOOD, kind="crowd"), "kind must be one of"),
        (dict(GOOD, score=None), "needs a score"),
        (dict(GOOD, score="high"), "field 'score' must be a finite number"),
        (dict(GOOD, system=3), "field 'system' must be a string"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_records_name_file_line_and_field(tmp_path, record, message):
    path = _write(tmp_path / "bad.jsonl", [GOOD, dict(GOOD, example_id="e2"), record])
    with pytest.raises(ValueError) as info:
        load_scores_frame(path)
    assert f"{path}:3" in str(info.value)
    assert message in str(info.value)


def test_nan_score_is_rejected(tmp_path):
    path = tmp_path / "nan.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD).replace("0.5", "NaN") + "\n")
    with pytest.raises(ValueError, match=r"nan\.jsonl:2: field 'score'"):
        load_scores_frame(path)


def test_duplicate_rows_are_an_error():
    with pytest.raises(ValueError, match="duplicate scores row.*example_id='e'"):
        cube_of([bert("a", "e", 0.7), bert("a", "e", 0.8)])


def test_metric_on_the_wrong_track_is_an_error():
    frame, _ = cube_of([bert("a", "e", 0.7)])
    frame["track"] = frame["track"].cat.rename_categories({"text": "image"})
    with pytest.raises(ValueError, match="metric 'bertscore' rows must have track 'text'"):
        build_cube(frame)


def test_unknown_metrics_stay_out_of_the_cube():
    frame, cube = cube_of(
        [bert("a", "e", 0.7), judge("a", "e", "text", "j", [1, 2, 3, 4])]
        + [
            [
                r.__class__("a", "e", "metric", "image", "dreamsim", "distance", 0.3, "ok")
                for r in bert("a", "e", 0.7)
            ]
        ]
    )
    assert [c.name for c in cube.cells] == ["bertscore", "text:j"]


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="scores table not found"):
        load_scores_frame(tmp_path / "nope.jsonl")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    assert load_scores_frame(path).empty


def test_parquet_copy_loads_the_same(tmp_path):
    frame = synthetic_scores(n_systems=2, n_examples=5, judges_per_track=1, seed=2)
    jsonl = write_scores_frame(frame, tmp_path / "scores.jsonl")
    parquet = tmp_path / "scores.parquet"
    load_scores_frame(jsonl).astype({c: str for c in frame.columns if c != "score"}).to_parquet(
        parquet
    )
    a, b = load_scores_frame(jsonl), load_scores_frame(parquet)
    np.testing.assert_array_equal(a["score"].to_numpy(), b["score"].to_numpy())
    assert list(a["criterion"].astype(str)) == list(b["criterion"].astype(str))


def test_bad_parquet_row_is_named(tmp_path):
    import pandas as pd

    bad = pd.DataFrame([GOOD, dict(GOOD, example_id="e2", status="done")])
    bad.to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"bad\.parquet: row 1: .*status must be one of"):
        load_scores_frame(tmp_path / "bad.parquet")


def test_judges_keep_first_appearance_order():
    groups = [judge("s", "e", "text", name, [5, 5, 5, 5]) for name in ("zeta", "alpha", "mid")]
    _, cube = cube_of(groups)
    assert [cube.cells[k].evaluator for k in cube.judge_indices("text")] == ["zeta", "alpha", "mid"]


def test_a_fifth_criterion_in_a_track_is_an_error():
    rows = [
        judge("s", "e", "text", "j", [5, 5, 5, 5]),
        judge("s", "e", "text", "k", [5, 5, 5, 5], criteria=("c1", "c2", "c3", "typo")),
    ]
    with pytest.raises(ValueError, match="track 'text' has 5 distinct criteria"):
        cube_of(rows)
