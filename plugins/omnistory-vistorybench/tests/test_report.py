"""The ViStoryBench report through the real CLI: the official leaderboard from bench_results CSVs,
our scores under the three policies beside the published numbers, the story strips of a real
sweep over the fixture, and bad input as one line with exit 2."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from omnistory_testkit import run_cli
from omnistory_vistorybench import leaderboard as lb

#: the official leaderboard CSV's headers, written out so that a change to the constants fails
OFFICIAL_HEADERS = [
    "Method",
    "model",
    "mode",
    "Character Consistency(CRef)_rank",
    "Style Consistency(SRef)_rank",
    "Prompt Alignment_rank",
    "Generative Quality_rank",
    "Diversity_rank",
    "overall_rank",
    "model_key",
]

_HEADER = [
    "method",
    "model",
    "mode",
    "timestamp",
    "metrics.aesthetic.metrics.aesthetic_score",
    "metrics.cids.metrics.cids_cross_mean",
    "metrics.cids.metrics.cids_self_mean",
    "metrics.csd.metrics.cross_csd",
    "metrics.csd.metrics.self_csd",
    "metrics.diversity.metrics.inception_score",
    "metrics.prompt_align.metrics.camera",
    "metrics.prompt_align.metrics.scene",
]


def _write_csv(path: Path, rows: list[list[str]], header: list[str] = _HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8-sig") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _published(tmp_path: Path) -> tuple[Path, Path]:
    lite = _write_csv(
        tmp_path / "bench_results_lite.csv",
        [
            ["UNO", "base", "en", "20250101_000000", "5.5", "0.4", "0.6", "0.5", "0.5", "8"]
            + ["2.5", "3.1"],
            ["UNO", "base", "ch", "20250101_000000", "5.0", "0.3", "0.5", "0.4", "0.6", "9"]
            + ["2.0", "3.3"],
            ["StoryGen", "auto-regressive", "en", "20250102_000000", "4.5", "0.2", "0.3"]
            + ["0.3", "0.4", "", "1.5", "2.1"],
            # outside the official roster, and a name the page must escape
            ["<b>Mine</b>", "base", "en", "20250103_000000", "9", "1", "1", "1", "1", "9"]
            + ["4", "4"],
        ],
    )
    full = _write_csv(
        tmp_path / "bench_results_full.csv",
        [
            ["UNO", "base", "en", "20250101_000000", "5.4", "0.35", "0.55", "0.45", "0.5", "7"]
            + ["2.4", "3.0"],
            ["GPT4o", "base", "en", "20250104_000000", "5.49", "0.5", "0.6", "0.4", "0.55", "9.02"]
            + ["3.6", "3.7"],
        ],
    )
    return lite, full


def _expected_csv(tmp_path: Path, board: pd.DataFrame, name: str) -> bytes:
    return lb.write_leaderboard_csv(board, tmp_path / "expected" / name).read_bytes()


def _header_of(path: Path) -> list[str]:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        return next(csv.reader(fh))


def test_leaderboard_from_official_bench_results_csvs(tmp_path: Path) -> None:
    lite, full = _published(tmp_path)
    out = tmp_path / "report"
    proc = run_cli(
        "report",
        "--task",
        "vistorybench",
        "--bench-results-csv",
        str(lite),
        "--bench-results-csv",
        str(full),
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert _header_of(out / "leaderboard.csv")[:10] == OFFICIAL_HEADERS
    frame = pd.concat([lb.read_bench_results_csv(lite), lb.read_bench_results_csv(full)])
    board = lb.official_leaderboard(frame, groups=lb.OFFICIAL_GROUPS)
    # the same input through official_leaderboard gives the same file, byte for byte
    assert (out / "leaderboard.csv").read_bytes() == _expected_csv(tmp_path, board, "all.csv")
    for split in ("lite", "full"):
        part = board[board["split"] == split]
        got = (out / f"leaderboard_{split}.csv").read_bytes()
        assert got == _expected_csv(tmp_path, part, f"{split}.csv")
    back = pd.read_csv(out / "leaderboard_lite.csv", encoding="utf-8-sig")
    assert back["model"].tolist() == ["UNO", "StoryGen"]
    # UNO's two languages are averaged as the official does
    assert back["scene"].iloc[0] == pytest.approx(3.2)
    assert back["Method"].tolist() == ["Story image method", "Story image method"]
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "&lt;b&gt;Mine&lt;/b&gt;" in html and "<b>Mine" not in html
    assert html.count('<table class="leaderboard"') == 2  # lite and full, the official policy
    assert "No scores yet" in html

    # --roster all ranks the method outside the official roster too, with an empty group label
    proc = run_cli(
        "report",
        "--task",
        "vistorybench",
        "--bench-results-csv",
        str(lite),
        "--roster",
        "all",
        "--out",
        str(tmp_path / "all"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    back = pd.read_csv(tmp_path / "all" / "leaderboard.csv", encoding="utf-8-sig")
    assert "<b>Mine</b>" in back["model"].tolist()


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [["UNO", "base", "en", "t", "high", *[""] * 7]],
            r"bench_results_lite\.csv: row 1 \(line 2\), column "
            r"'metrics\.aesthetic\.metrics\.aesthetic_score': 'high' is not a number",
        ),
        ([["UNO", "base", "en"]], r"bench_results_lite\.csv: row 1 \(line 2\) has 3 cells"),
    ],
)
def test_a_bad_bench_results_csv_is_one_line_and_exit_2(
    tmp_path: Path, rows: list[list[str]], message: str
) -> None:
    path = _write_csv(tmp_path / "bench_results_lite.csv", rows)
    proc = run_cli(
        "report",
        "--task",
        "vistorybench",
        "--bench-results-csv",
        str(path),
        "--out",
        str(tmp_path / "out"),
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), proc.stderr
    assert not (tmp_path / "out" / "leaderboard.csv").exists()


# ----------------------------------------------------------------------------------------------
# a real sweep over the fixture, then our scores


def _sweep(tmp_path: Path) -> Path:
    proc = run_cli(
        "-m",
        "task=vistorybench",
        "system=copy_paste",
        "dataset=vistory_fixture",
        "engine.progress=false",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (manifest,) = (tmp_path / "outputs" / "sweeps").rglob("copy_paste/manifest.json")
    return manifest.parent.parent


def _strip(html: str, story: str) -> str:
    match = re.search(
        rf'<div class="strip" data-system="copy_paste/[^"]*" data-story="{story}">'
        r"(.*?)</div></div>",
        html,
    )
    assert match, f"no strip of story {story}"
    return match.group(1)


def _refs(html: str, story: str) -> str:
    match = re.search(rf'<div class="refs" data-story="{story}">(.*?)</div>', html)
    assert match, f"no references of story {story}"
    return match.group(1)


def _row(example: str, evaluator: str, criterion: str, score: float | None, **extra: str) -> dict:
    status = extra.pop("status", "ok")
    row = {
        "system": "copy_paste",
        "example_id": example,
        "kind": extra.pop("kind", "metric"),
        "track": extra.pop("track", "character"),
        "evaluator": evaluator,
        "criterion": criterion,
        "score": score,
        "status": status,
        **extra,
    }
    if status == "error":
        row["cause"] = "server unreachable"
    return row


def _scores() -> list[dict]:
    """Item, group and run rows with every status (the fixture's stories: 01 has shots 1-5 and 7
    (6 is dropped by the loader), 02 has shots 1-3)."""
    rows = []
    for shot in ("01_01", "01_02", "01_03", "01_04", "01_05", "01_07"):
        rows.append(_row(shot, "prompt_align", "scene", 3.0, kind="judge", track="prompt"))
        if shot == "01_02":
            rows.append(_row(shot, "prompt_align", "camera", None, status="invalid"))
        else:
            rows.append(_row(shot, "prompt_align", "camera", 2.0, kind="judge", track="prompt"))
    rows.append(_row("02_01", "prompt_align", "scene", 1.0, kind="judge", track="prompt"))
    rows.append(_row("02_02", "prompt_align", "scene", None, status="missing_output"))
    rows.append(_row("02_03", "prompt_align", "scene", None, status="error"))
    for story, self_, cross in (("01", 0.5, 0.25), ("02", 0.25, None)):
        rows.append(_row(story, "cids", "cids_self_mean", self_, scope="group"))
        status = "ok" if cross is not None else "missing_output"
        rows.append(_row(story, "cids", "cids_cross_mean", cross, scope="group", status=status))
    rows.append(_row("01", "csd", "self_csd", 0.7, scope="group", track="style"))
    rows.append(_row("02", "csd", "self_csd", None, scope="group", track="style", status="error"))
    rows.append(_row("01", "aesthetic", "aesthetic_score", 5.0, scope="group", track="quality"))
    rows.append(_row("02", "aesthetic", "aesthetic_score", 6.0, scope="group", track="quality"))
    # a dataset-level value of a story metric: the official summary takes it over the story mean
    rows.append(_row("", "aesthetic", "aesthetic_score", 7.0, scope="run", track="quality"))
    rows.append(_row("", "diversity", "inception_score", 4.5, scope="run", track="diversity"))
    return rows


def _write_scores(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


#: our run table by hand, per policy and split (see _scores): camera of story 01 is 2.0 over its
#: scored shots, 10/6 zero-filled (the invalid shot counts 0), and story 02 has no camera row at
#: all (0 zero-filled); scene of story 02 is 1.0, zero-filled 1/2 (the error shot left out)
_GOLDEN = {
    "official": {
        "full": {
            "aesthetic_score": 7.0,
            "camera": 2.0,
            "cids_cross_mean": 0.25,
            "cids_self_mean": 0.375,
            "inception_score": 4.5,
            "scene": 2.0,
            "self_csd": 0.7,
        },
        "lite": {
            "aesthetic_score": 7.0,
            "camera": 2.0,
            "cids_cross_mean": 0.25,
            "cids_self_mean": 0.5,
            "inception_score": 4.5,
            "scene": 3.0,
            "self_csd": 0.7,
        },
    },
    "valid_only": {
        "full": {
            "aesthetic_score": 5.5,
            "camera": 2.0,
            "cids_cross_mean": 0.25,
            "cids_self_mean": 0.375,
            "inception_score": 4.5,
            "scene": 2.0,
            "self_csd": 0.7,
        },
        "lite": {
            "aesthetic_score": 5.0,
            "camera": 2.0,
            "cids_cross_mean": 0.25,
            "cids_self_mean": 0.5,
            "inception_score": 4.5,
            "scene": 3.0,
            "self_csd": 0.7,
        },
    },
    "zero_filled": {
        "full": {
            "aesthetic_score": 5.5,
            "camera": (10.0 / 6 + 0.0) / 2,
            "cids_cross_mean": 0.125,
            "cids_self_mean": 0.375,
            "inception_score": 4.5,
            "scene": (3.0 + 0.5) / 2,
            "self_csd": 0.7,
        },
        "lite": {
            "aesthetic_score": 5.0,
            "camera": 10.0 / 6,
            "cids_cross_mean": 0.25,
            "cids_self_mean": 0.5,
            "inception_score": 4.5,
            "scene": 3.0,
            "self_csd": 0.7,
        },
    },
}


def _our_table(policy: str, timestamp: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "split": split,
                "method": "copy_paste",
                "mode": "base",
                "language": "en",
                "timestamp": timestamp,
                **values,
            }
            for split, values in _GOLDEN[policy].items()
        ]
    )


def test_sweep_end_builds_the_report_then_scores_rank_beside_published(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path)
    report = sweep / "report"
    # the sweep's end: no metrics configured -> a leaderboard saying no scores yet, and the strips
    assert _header_of(report / "leaderboard.csv")[:10] == OFFICIAL_HEADERS
    assert pd.read_csv(report / "leaderboard.csv", encoding="utf-8-sig").empty
    html = (report / "index.html").read_text(encoding="utf-8")
    assert "No scores yet" in html
    assert _strip(html, "01").count("<img ") == 6 and _strip(html, "02").count("<img ") == 3
    # story 01: Eileen (2 images), Chelsea, Pip; story 02: Captain Bo (2 images), Dapple
    assert _refs(html, "01").count("<img ") == 4 and _refs(html, "02").count("<img ") == 3
    assert 'data-character="Captain Bo"' in _refs(html, "02")
    for src in re.findall(r'<img src="([^"]+)"', html):
        assert (report / src).is_file(), src  # copied in: the report is self-contained

    # one shot failed, one image lost after the run: both shown as missing, in shot order
    job = sweep / "copy_paste"
    records = [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines()]
    for record in records:
        if record["id"] == "01_03":
            record.update(status="failure", category="model_error", message="out of memory")
            del record["path"]
        if record["id"] == "02_02":
            (job / record["path"]).unlink()
    (job / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    scores = _write_scores(tmp_path / "scores.jsonl", _scores())
    lite, full = _published(tmp_path)
    out = tmp_path / "report"
    # no --task: the job manifests name vistorybench
    proc = run_cli(
        "report",
        "--scores",
        str(scores),
        "--run-dir",
        str(sweep),
        "--bench-results-csv",
        str(lite),
        "--bench-results-csv",
        str(full),
        "--no-published",  # these CSVs only, not the shipped tables
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    timestamp = json.loads((job / "manifest.json").read_text())["layout"]["timestamp"]
    published = pd.concat([lb.read_bench_results_csv(lite), lb.read_bench_results_csv(full)])
    names = {"official": "leaderboard.csv"}
    names.update({p: f"leaderboard_{p}.csv" for p in ("valid_only", "zero_filled")})
    for policy, name in names.items():
        assert _header_of(out / name)[:10] == OFFICIAL_HEADERS
        frame = pd.concat([_our_table(policy, timestamp), published], ignore_index=True)
        groups = {**lb.OFFICIAL_GROUPS, "copy_paste": ""}
        expected = lb.official_leaderboard(frame, groups=groups)
        expected["source"] = [
            "ours" if m == "copy_paste" else "published" for m in expected["model"]
        ]
        written = pd.read_csv(out / name, encoding="utf-8-sig", keep_default_na=False)
        # scored with stand-in rows of no recorded evaluator: ours are not comparable
        settings = dict(zip(written["model"], written["metric_settings"], strict=False))
        assert settings.pop("copy_paste").startswith("not comparable: ")
        assert set(settings.values()) == {"published"}
        expected["metric_settings"] = written["metric_settings"].tolist()
        assert (out / name).read_bytes() == _expected_csv(tmp_path, expected, name), policy
    board = pd.read_csv(out / "leaderboard_zero_filled.csv", encoding="utf-8-sig")
    ours = board[(board["model"] == "copy_paste") & (board["split"] == "full")].iloc[0]
    assert ours["scene"] == 1.75 and ours["cids_cross_mean"] == 0.125
    assert set(board.loc[board["model"] != "copy_paste", "source"]) == {"published"}
    assert "<b>Mine</b>" not in board["model"].tolist()  # outside the official roster

    failures = pd.read_csv(out / "failures.csv", encoding="utf-8-sig")
    scene = failures[failures["metric"] == "scene"].iloc[0]
    assert scene[["ok", "missing_output", "invalid", "error", "failed"]].tolist() == [7, 1, 0, 1, 2]
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "No scores yet" not in html
    assert html.count('<table class="leaderboard"') == 6  # 3 policies x 2 splits
    assert html.count('<span class="badge">published</span>') > 0
    strip = _strip(html, "01")
    assert strip.count("<img ") == 5 and "missing: model_error" in strip
    assert re.findall(r'data-shot="(\d+)"', strip) == ["1", "2", "3", "4", "5", "7"]
    strip = _strip(html, "02")
    assert strip.count("<img ") == 2 and "missing: image file missing" in strip
    assert _refs(html, "01").count("<img ") == 4

    # the dataset moved away: the strips come from the records alone, without references
    manifest = json.loads((job / "manifest.json").read_text())
    manifest["dataset"].update(name="vistory", root=str(tmp_path / "moved"))
    (job / "manifest.json").write_text(json.dumps(manifest))
    proc = run_cli("report", "--run-dir", str(sweep), "--out", "moved-report", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "moved-report" / "index.html").read_text(encoding="utf-8")
    assert "not found: no reference images" in html
    strip = _strip(html, "01")
    assert re.findall(r'data-shot="(\d+)"', strip) == ["1", "2", "3", "4", "5", "7"]
    assert strip.count("<img ") == 5 and "<img " not in _refs(html, "01")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            '{"system": "s", "example_id": "01_01"}',
            r"scores\.jsonl:2: field 'evaluator' is missing",
        ),
        (
            json.dumps(_row("01_01", "prompt_align", "scene", None, status="ok")),
            r"scores\.jsonl:2: field 'score': status 'ok' needs a finite score",
        ),
        (
            json.dumps(_row("01", "cids", "occm", 1.0, scope="story")),
            r"scores\.jsonl:2: field 'scope': 'story' is not one of",
        ),
        ("not json", r"scores\.jsonl:2: not a JSON object"),
    ],
)
def test_a_bad_scores_row_is_one_line_and_exit_2(tmp_path: Path, line: str, message: str) -> None:
    good = json.dumps(_row("01_01", "prompt_align", "scene", 2.0))
    path = tmp_path / "scores.jsonl"
    path.write_text(f"{good}\n{line}\n", encoding="utf-8")
    proc = run_cli(
        "report", "--task", "vistorybench", "--scores", str(path), "--out", "out", cwd=tmp_path
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), proc.stderr


def test_scores_alone_rank_with_the_defaults(tmp_path: Path) -> None:
    # no run directory: the system's run is (mode base, language en), every story it has rows
    # for, one split "all"
    scores = _write_scores(tmp_path / "scores.jsonl", _scores())
    proc = run_cli(
        *("report", "--task", "vistorybench", "--scores", str(scores), "--no-published"),
        *("--out", "out"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    board = pd.read_csv(tmp_path / "out" / "leaderboard.csv", encoding="utf-8-sig")
    assert board[["model", "mode", "split", "overall_rank"]].values.tolist() == [
        ["copy_paste", "base", "all", 1]
    ]
    assert board["scene"].iloc[0] == 2.0 and board["aesthetic_score"].iloc[0] == 7.0
    assert not math.isnan(board["inception_score"].iloc[0])
    assert not (tmp_path / "out" / "leaderboard_all.csv").exists()
