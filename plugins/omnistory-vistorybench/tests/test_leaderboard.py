"""The official ViStoryBench leaderboard: hand-computed goldens, a property test against an
independent implementation of the official rules, the official bench_results CSV, and the means
over stories."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omnistory_vistorybench import bench_csv
from omnistory_vistorybench import leaderboard as lb
from omnistory_vistorybench import means as vmeans

RANKS = [lb.CATEGORY_HEADERS[c] for c in lb.CATEGORIES]
ALL_METRICS = [m for subs in lb.CATEGORIES.values() for m in subs]


def _run(method: str, mode: str, split: str = "all", language: str = "en", **metrics: float):
    return {"split": split, "method": method, "mode": mode, "language": language, **metrics}


def _uniform(value: float, *, skip: tuple[str, ...] = ()) -> dict[str, float]:
    return {m: value for m in ALL_METRICS if m not in skip}


def _ranks(board: pd.DataFrame) -> list[tuple]:
    cols = ["model", "mode", *RANKS, "overall_rank"]
    return [tuple(r) for r in board[cols].itertuples(index=False)]


# ----------------------------------------------------------------------------------------------
# goldens


def test_submetric_ranks_average_ties_and_missing_is_worst() -> None:
    ranks = lb.submetric_ranks(pd.Series([0.5, 1.0, math.nan, 0.5, math.nan, math.inf]))
    # four missing (two NaN, inf) all get n = 6, not their average position
    assert ranks.tolist() == [2.5, 1.0, 6.0, 2.5, 6.0, 6.0]


def test_ties_and_missing_values() -> None:
    prompt = ("scene", "camera", "character_action", "single_character_action")
    frame = pd.DataFrame(
        [
            _run(
                "A",
                "m",
                cids_self_mean=0.9,
                cids_cross_mean=0.5,
                self_csd=0.4,
                cross_csd=0.4,
                **dict.fromkeys(prompt, 3.0),
                aesthetic_score=5.0,
                inception_score=10.0,
            ),
            _run(
                "B",
                "m",
                cids_self_mean=0.9,
                cids_cross_mean=0.7,
                self_csd=0.4,
                cross_csd=0.2,
                **dict.fromkeys(prompt, 2.0),
                aesthetic_score=5.0,
                inception_score=math.nan,
            ),
            _run(
                "C",
                "m",
                cids_self_mean=0.8,
                cids_cross_mean=math.nan,
                self_csd=0.1,
                cross_csd=0.4,
                **dict.fromkeys(prompt, 2.0),
                aesthetic_score=6.0,
                inception_score=8.0,
            ),
        ]
    )
    board = lb.official_leaderboard(frame)
    # char: self A1.5 B1.5 C3, cross B1 A2 C3 (missing) -> scores A1.75 B1.25 C3
    # style: self A1.5 B1.5 C3, cross A1.5 C1.5 B3 -> A1.5 B2.25 C2.25 -> dense A1 B2 C2
    # prompt A1 B2 C2; quality C1 A2 B2; diversity A1 C2 B3 (missing)
    # overall means: A 7/5, B 10/5, C 10/5 -> dense A1 B2 C2, the tie ordered by name
    assert _ranks(board) == [
        ("A", "m", 2, 1, 1, 2, 1, 1),
        ("B", "m", 1, 2, 2, 2, 3, 2),
        ("C", "m", 3, 2, 2, 1, 2, 2),
    ]
    assert list(board.columns[: len(lb.LEADERBOARD_HEADERS)]) == list(lb.LEADERBOARD_HEADERS)
    assert board["Method"].tolist() == ["", "", ""]
    assert board["model_key"].tolist() == [" - A", " - B", " - C"]


def test_tie_in_mean_category_rank_takes_the_first_mode_name() -> None:
    rest = ("cids_self_mean", "cids_cross_mean", "self_csd", "cross_csd")
    frame = pd.DataFrame(
        [
            # X/b wins char and loses style, X/a the reverse: both mean category ranks are 2
            _run("X", "b", cids_self_mean=0.9, cids_cross_mean=0.9, self_csd=0.1, cross_csd=0.1),
            _run("X", "a", cids_self_mean=0.1, cids_cross_mean=0.1, self_csd=0.9, cross_csd=0.9),
            _run("Y", "base", cids_self_mean=0.5, cids_cross_mean=0.5, self_csd=0.5, cross_csd=0.5),
        ]
    )
    for key, value in _uniform(1.0, skip=rest).items():
        frame[key] = value
    modes = lb.best_modes(lb.method_mode_means(frame))
    assert list(zip(modes["method"], modes["mode"], strict=True)) == [("X", "a"), ("Y", "base")]
    # among the chosen: char Y1 X2, style X1 Y2, the rest tied -> both means 6/5, both overall 1
    assert _ranks(lb.official_leaderboard(frame)) == [
        ("X", "a", 2, 1, 1, 1, 1, 1),
        ("Y", "base", 1, 2, 1, 1, 1, 1),
    ]


def test_lite_and_full_are_ranked_separately() -> None:
    frame = pd.DataFrame(
        [
            _run("P", "m1", "lite", **_uniform(1.0)),
            _run("P", "m2", "lite", **_uniform(0.5)),
            _run("Q", "q", "lite", **_uniform(0.0)),
            _run("P", "m1", "full", **_uniform(0.0)),
            _run("P", "m2", "full", **_uniform(0.25)),
            _run("Q", "q", "full", **_uniform(0.5)),
        ]
    )
    board = lb.official_leaderboard(frame)
    got = list(
        zip(board["split"], board["model"], board["mode"], board["overall_rank"], strict=True)
    )
    assert got == [
        ("lite", "P", "m1", 1),
        ("lite", "Q", "q", 2),
        ("full", "Q", "q", 1),
        ("full", "P", "m2", 2),
    ]
    for split in ("lite", "full"):
        part = board[board["split"] == split]
        assert (part[RANKS].to_numpy() == part[["overall_rank"]].to_numpy()).all()


def test_rows_are_averaged_over_languages_and_timestamps() -> None:
    frame = pd.DataFrame(
        [
            {**_run("A", "m", language="en"), "timestamp": "t1", "occm": 0.25, "scene": 1.0},
            {**_run("A", "m", language="ch"), "timestamp": "t1", "occm": 0.75, "scene": 2.0},
            {**_run("A", "m", language="ch"), "timestamp": "t2", "occm": math.nan, "scene": 3.0},
        ]
    )
    means = lb.method_mode_means(frame)
    assert means[["occm", "scene"]].iloc[0].tolist() == [0.5, 2.0]
    board = lb.official_leaderboard(frame)
    assert board[["occm", "scene"]].iloc[0].tolist() == [0.5, 2.0]


def test_prompt_align_avg_counts_single_character_action_twice() -> None:
    metrics = {"scene": 3.0, "camera": 2.0, "character_action": 1.0, "single_character_action": 4.0}
    assert lb.prompt_align_avg(metrics) == pytest.approx((3 + 2 + 1 + 2 * 4) / 5)
    assert lb.prompt_align_avg(metrics, faithful=False) == pytest.approx(2.5)
    with_existence = {**metrics, "character_existence": 0.0}
    assert lb.prompt_align_avg(with_existence) == pytest.approx((3 + 2 + 1 + 4 + 0) / 5)
    assert lb.prompt_align_avg({"scene": 3.0, "camera": 1.0}) == 2.0
    assert math.isnan(lb.prompt_align_avg({}))
    frame = pd.DataFrame([_run("A", "m", **metrics)])
    assert lb.official_leaderboard(frame)["prompt_align_avg"].iloc[0] == pytest.approx(2.8)
    plain = lb.official_leaderboard(frame, faithful=False)
    assert plain["prompt_align_avg"].iloc[0] == pytest.approx(2.5)


def test_groups_restrict_and_label() -> None:
    frame = pd.DataFrame(
        [_run("UNO", "base", **_uniform(1.0)), _run("Ours", "base", **_uniform(2.0))]
    )
    board = lb.official_leaderboard(frame, groups=lb.OFFICIAL_GROUPS)
    assert board[["Method", "model", "overall_rank", "model_key"]].values.tolist() == [
        ["Story image method", "UNO", 1, "Story image method - UNO"]
    ]


def test_empty_and_bad_frames() -> None:
    board = lb.official_leaderboard(pd.DataFrame(columns=["method", "mode"]))
    assert board.empty and list(board.columns[:10]) == list(lb.LEADERBOARD_HEADERS)
    with pytest.raises(ValueError, match="lacks column"):
        lb.official_leaderboard(pd.DataFrame({"method": ["A"]}))
    with pytest.raises(ValueError, match="empty 'mode'"):
        lb.official_leaderboard(pd.DataFrame({"method": ["A", "B"], "mode": ["x", None]}))


# ----------------------------------------------------------------------------------------------
# property test: an independent implementation of the official rules, in plain Python


def _ref_mean(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


def _ref_avg_ranks(scores: dict, better) -> dict:
    """Average-tie ranks by counting: a value's rank is the number of strictly better values plus
    the middle of its tie group; None gets the number of entries."""
    n = len(scores)
    out = {}
    for key, v in scores.items():
        if v is None:
            out[key] = float(n)
            continue
        ahead = 0
        tied = 0
        for w in scores.values():
            if w is None:
                continue
            if better(w, v):
                ahead += 1
            elif w == v:
                tied += 1
        out[key] = ahead + (tied + 1) / 2
    return out


def _ref_category_ranks(avg: dict, keys: list) -> dict:
    result = {}
    for category, subs in lb.CATEGORIES.items():
        per_sub = []
        for metric in subs:
            values = {k: avg[k].get(metric) for k in keys}
            per_sub.append(_ref_avg_ranks(values, lambda w, v: w > v))
        score = {k: sum(r[k] for r in per_sub) / len(per_sub) for k in keys}
        result[category] = _ref_avg_ranks(score, lambda w, v: w < v)
    return result


def _ref_dense(values: dict) -> dict:
    distinct = sorted(set(values.values()))
    return {k: distinct.index(v) + 1 for k, v in values.items()}


def _ref_pa_avg(metrics: dict, faithful: bool) -> float | None:
    vals = []
    for key in ("scene", "camera", "character_action", "single_character_action"):
        if metrics.get(key) is not None:
            vals.append(metrics[key])
    if faithful:
        for key in (
            "character_existence",
            "character_existence_number",
            "character_number",
            "single_character_action",
        ):
            if metrics.get(key) is not None:
                vals.append(metrics[key])
                break
    return sum(vals) / len(vals) if vals else None


def _ref_leaderboard(records: list[dict], groups, faithful: bool) -> list[tuple]:
    splits: list[str] = []
    for rec in records:
        if rec["split"] not in splits:
            splits.append(rec["split"])
    rows = []
    for split in splits:
        collected: dict[tuple, dict[str, list]] = {}
        for rec in records:
            if rec["split"] != split:
                continue
            if groups is not None and rec["method"] not in groups:
                continue
            run = collected.setdefault((rec["method"], rec["mode"]), {})
            for key, value in rec.items():
                if key not in ("split", "method", "mode", "language", "timestamp"):
                    run.setdefault(key, []).append(value)
        avg = {}
        for key, metrics in collected.items():
            avg[key] = {}
            for metric, values in metrics.items():
                mean = _ref_mean(values)
                if mean is not None:
                    avg[key][metric] = mean
        keys = list(avg)
        if not keys:
            continue
        cats = _ref_category_ranks(avg, keys)
        chosen = {}
        for method in sorted({m for m, _ in keys}):
            best = None
            best_mean = math.inf
            for key in sorted(k for k in keys if k[0] == method):
                mean = sum(cats[c][key] for c in lb.CATEGORIES) / len(lb.CATEGORIES)
                if mean < best_mean:
                    best, best_mean = key, mean
            chosen[method] = best
        final = _ref_category_ranks(avg, list(chosen.values()))
        ints = {c: _ref_dense(final[c]) for c in lb.CATEGORIES}
        means = {}
        for key in chosen.values():
            means[key] = sum(ints[c][key] for c in lb.CATEGORIES) / len(lb.CATEGORIES)
        overall = _ref_dense(means)
        for method in sorted(chosen, key=lambda m: overall[chosen[m]]):
            key = chosen[method]
            rows.append(
                (
                    split,
                    method,
                    key[1],
                    *[ints[c][key] for c in lb.CATEGORIES],
                    overall[key],
                    *[avg[key].get(m) for m in lb.SHOWN_METRICS[:-1]],
                    _ref_pa_avg(avg[key], faithful),
                )
            )
    return rows


_VALUES = [0.0, 0.1, 0.2, 0.25, 0.5, 0.7, 1.0, math.nan]
_OPTIONAL = ["occm", "copy_paste_score", "character_existence", "character_number"]


def _random_records(rng: np.random.Generator) -> list[dict]:
    methods = ["A", "B", "C", "D"][: rng.integers(1, 5)]
    modes = ["base", "ref", "x"]
    present = [m for m in ALL_METRICS + _OPTIONAL if rng.random() < 0.8]
    records = []
    for split in ("lite", "full"):
        for method in methods:
            for mode in modes:
                if rng.random() < 0.4:
                    continue
                for language in ("en", "ch"):
                    for timestamp in ("t1", "t2"):
                        if rng.random() < 0.5:
                            continue
                        rec = {
                            "split": split,
                            "method": method,
                            "mode": mode,
                            "language": language,
                            "timestamp": timestamp,
                        }
                        for metric in present:
                            rec[metric] = float(rng.choice(_VALUES))
                        records.append(rec)
    order = rng.permutation(len(records))
    return [records[i] for i in order]


def _as_tuples(board: pd.DataFrame) -> list[tuple]:
    cols = ["split", "model", "mode", *RANKS, "overall_rank", *lb.SHOWN_METRICS]
    out = []
    for row in board[cols].itertuples(index=False):
        out.append(tuple(None if isinstance(v, float) and math.isnan(v) else v for v in row))
    return out


@pytest.mark.parametrize("seed", range(200))
def test_matches_an_independent_implementation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    records = _random_records(rng)
    groups = {"A": "g1", "C": "g2"} if seed % 5 == 0 else None
    faithful = seed % 3 != 0
    frame = pd.DataFrame(records, columns=list(records[0]) if records else ["method", "mode"])
    expected = _ref_leaderboard(records, groups, faithful)
    got = _as_tuples(lb.official_leaderboard(frame, groups=groups, faithful=faithful))
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g[:9] == e[:9]
        # shown means: the same in-order sums, so equal, not just close
        assert g[9:] == e[9:]


# ----------------------------------------------------------------------------------------------
# the official bench_results CSV

_HEADER = [
    "method",
    "model",
    "mode",
    "timestamp",
    "metrics.aesthetic.metrics.aesthetic_score",
    "metrics.cids.metrics.cids_cross_mean",
    "metrics.cids.metrics.cids_self_mean",
    "metrics.cids.metrics.copy_paste_score",
    "metrics.cids.metrics.occm",
    "metrics.csd.metrics.cross_csd",
    "metrics.csd.metrics.self_csd",
    "metrics.diversity.metrics.inception_score",
    "metrics.prompt_align.metrics.camera",
    "metrics.prompt_align.metrics.character_action",
    "metrics.prompt_align.metrics.scene",
]


def _write_csv(path: Path, rows: list[list[str]], header: list[str] = _HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8-sig") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_reads_an_official_bench_results_csv(tmp_path: Path) -> None:
    rows = [
        ["UNO", "base", "en", "20250101_000000", "5.5", "0.5", "0.75", "0.3", "80", "0.4", "0.6"]
        + ["", "2", "3", "1"],
        ["UNO", "base", "ch", "20250101_000000", "5.0", "0.25", "0.25", "0.2", "70", "0.4", "0.6"]
        + ["", "2", "1", "3"],
        ["StoryGen", "auto-regressive", "en", "20250102_101010", "4.0", "0.1", "nan", "0.9"]
        + ["60", "0.2", "0.3", "", "1", "1", "1"],
    ]
    path = _write_csv(tmp_path / "bench_results_lite.csv", rows)
    frame = bench_csv.read_bench_results_csv(path)
    assert list(frame.columns[:5]) == list(lb.KEY_COLUMNS)
    assert frame["split"].unique().tolist() == ["lite"]
    assert frame[["method", "mode", "language"]].values.tolist()[1] == ["UNO", "base", "ch"]
    assert frame["cids_self_mean"].iloc[0] == 0.75
    assert math.isnan(frame["cids_self_mean"].iloc[2])
    assert math.isnan(frame["inception_score"].iloc[0])
    assert set(lb.OFFICIAL_COLUMNS[c] for c in frame.columns[5:]) == set(_HEADER[4:])

    board = lb.official_leaderboard(frame)
    uno = board[board["model"] == "UNO"].iloc[0]
    assert uno["cids_cross_mean"] == 0.375 and uno["occm"] == 75.0
    # UNO wins char, style, prompt and quality; nobody has an Inception Score, so both get the
    # worst rank 2 and tie on dense rank 1; StoryGen's mean (2+2+2+2+1)/5 ranks it second
    assert board["model"].tolist() == ["UNO", "StoryGen"]
    assert board["overall_rank"].tolist() == [1, 2]
    assert board["Diversity_rank"].tolist() == [1, 1]

    out = lb.write_leaderboard_csv(board, tmp_path / "out" / "leaderboard_summary_lite.csv")
    assert out.read_bytes().startswith(b"\xef\xbb\xbf")
    with out.open(encoding="utf-8-sig", newline="") as fh:
        back = list(csv.reader(fh))
    assert back[0][:10] == list(lb.LEADERBOARD_HEADERS)
    assert back[1][:10] == ["", "UNO", "base", "1", "1", "1", "1", "1", "1", " - UNO"]
    assert bench_csv.read_bench_results_csv(path, split="x")["split"].iloc[0] == "x"


def test_all_runs_export_drops_non_metric_columns(tmp_path: Path) -> None:
    header = [*_HEADER[:5], "run.method", "metrics.diversity.scope.level"]
    row = ["A", "m", "en", "t", "1.5", "A", "x"]
    path = _write_csv(tmp_path / "bench_results.csv", [row], header)
    frame = bench_csv.read_bench_results_csv(path)
    assert list(frame.columns) == [*lb.KEY_COLUMNS, "aesthetic_score"]
    assert frame["split"].iloc[0] == "all"


@pytest.mark.parametrize(
    ("rows", "header", "message"),
    [
        ([["A", "m", "en", "t", "0.5"], ["B", "m", "en", "t", "high"]], _HEADER[:5], None),
        ([["A", "m", "en", "t"]], _HEADER[:5], r"row 1 \(line 2\) has 4 cells, the header 5"),
        ([["A", "m", "en", "0.5"]], ["method", "model", "mode", _HEADER[4]], "timestamp"),
        ([["", "m", "en", "t", "1"]], _HEADER[:5], r"row 1 \(line 2\), column 'method' is empty"),
        ([], [*_HEADER[:5], _HEADER[4]], "duplicate column"),
        ([], [], "no header row"),
    ],
)
def test_malformed_csv_names_file_row_and_column(
    tmp_path: Path, rows: list[list[str]], header: list[str], message: str | None
) -> None:
    path = tmp_path / "bench_results_full.csv"
    if header:
        _write_csv(path, rows, header)
    else:
        path.write_text("", encoding="utf-8")
    if message is None:
        message = (
            r"bench_results_full\.csv: row 2 \(line 3\), column "
            r"'metrics\.aesthetic\.metrics\.aesthetic_score': 'high' is not a number"
        )
    with pytest.raises(ValueError, match=message) as info:
        bench_csv.read_bench_results_csv(path)
    assert str(path) in str(info.value)


# ----------------------------------------------------------------------------------------------
# means over stories


def _scores() -> pd.DataFrame:
    rows = [
        ("01", "occm", 1.0, "ok"),
        ("02", "occm", None, "missing_output"),
        ("03", "occm", None, "error"),
        ("04", "occm", 0.5, "ok"),
        ("01", "scene", 2.0, "ok"),
        ("02", "scene", None, "invalid"),
        ("", "inception_score", 7.0, "ok"),
    ]
    return pd.DataFrame(
        [
            {"system": "S", "mode": "base", "story_id": s, "metric": m, "score": v, "status": st}
            for s, m, v, st in rows
        ]
    )


def test_story_means_official_valid_only_and_zero_filled() -> None:
    means = vmeans.story_means(_scores()).set_index("metric")
    assert means.loc["occm", ["official", "valid_only"]].tolist() == [0.75, 0.75]
    # 01 and 04 have values, 02 counts 0, 03 (error) is left out: 1.5 / 3
    assert means.loc["occm", "zero_filled"] == pytest.approx(0.5)
    assert means.loc["occm", ["n_stories", "n_valid", "n_errors"]].tolist() == [4, 2, 1]
    # scene: only 01 has a value; the run's other three stories count 0
    assert means.loc["scene", ["valid_only", "zero_filled"]].tolist() == [2.0, 0.5]
    assert means.loc["inception_score", ["official", "valid_only", "zero_filled"]].tolist() == [
        7.0,
        7.0,
        7.0,
    ]
    assert means.loc["occm", "language"] == "en" and means.loc["occm", "timestamp"] == ""


def _row(story: str | None, metric: str, score: float, split: str = "") -> dict:
    key = {"system": "S", "mode": "base", "story_id": story, "metric": metric}
    return {**key, "score": score, "status": "ok", "split": split}


def test_story_means_restricted_to_stories_and_dataset_value_wins() -> None:
    rows = pd.concat([_scores(), pd.DataFrame([_row(None, "occm", 0.1)])])
    means = vmeans.story_means(rows, story_ids=["01", "02", "05"]).set_index("metric")
    assert means.loc["occm", "official"] == 0.1  # the dataset-scope value (scores.json)
    assert means.loc["occm", "valid_only"] == 1.0
    assert means.loc["occm", "zero_filled"] == pytest.approx(1 / 3)  # 05 has no row: 0


def test_run_means_builds_the_bench_results_table() -> None:
    per_split = [_row("", "inception_score", 3.0, "lite"), _row("", "inception_score", 7.0, "full")]
    rows = pd.concat([_scores().iloc[:-1], pd.DataFrame(per_split)])
    table = vmeans.run_means(rows, {"lite": ["01"], "full": None})
    assert list(table.columns) == [*lb.KEY_COLUMNS, "inception_score", "occm", "scene"]
    assert table[["split", "inception_score", "occm", "scene"]].values.tolist() == [
        ["lite", 3.0, 1.0, 2.0],
        ["full", 7.0, 0.75, 2.0],
    ]
    zero = vmeans.run_means(rows, {"full": None}, policy="zero_filled")
    assert zero["occm"].iloc[0] == pytest.approx(0.5)
    board = lb.official_leaderboard(table)
    assert board[["split", "model", "mode", "overall_rank"]].values.tolist() == [
        ["lite", "S", "base", 1],
        ["full", "S", "base", 1],
    ]
    with pytest.raises(ValueError, match="policy"):
        vmeans.run_means(rows, policy="mean")


def test_scores_table_errors() -> None:
    rows = _scores()
    with pytest.raises(ValueError, match="lacks column"):
        vmeans.story_means(rows.drop(columns="status"))
    with pytest.raises(ValueError, match="status 'done'"):
        vmeans.story_means(rows.assign(status="done"))
    with pytest.raises(ValueError, match="no finite value"):
        vmeans.story_means(rows.assign(status="ok"))
    with pytest.raises(ValueError, match="one row per"):
        vmeans.story_means(pd.concat([rows, rows.iloc[[0]]]))
