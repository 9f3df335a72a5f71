"""The task's report, the official aggregation of our runs, the published leaderboard beside
them, the official formats out, and a stand-in's results never served to the real metric.

One sweep through the real CLI (the test kit's stand-ins for FLUX.1-Kontext and for the five
metrics: instant, deterministic, no weights): one method in two languages with two parameter
sets, scored at the end of the sweep.  Everything else reads that sweep.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from omnistory_testkit import run_cli
from omnistory_testkit.standins import make_standin_site
from omnistory_vistorybench import leaderboard as lb
from test_leaderboard import _ref_leaderboard  # the independent official rules

METRICS = "cids,csd,aesthetic,diversity,prompt_align"
QUIET = ("engine.progress=false",)
METHOD = "kontext_first_ref"
#: two methods, so that the official ranking from the export has something to order
METHODS = {METHOD, "story_kontext"}
MODES = {"base-image.guidance=2.5", "base-image.guidance=3.5"}
OFFICIAL_HEADERS = list(lb.LEADERBOARD_HEADERS)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("standins")
    return {"PYTHONPATH": str(make_standin_site(root, evaluators=True))}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, site: dict[str, str]) -> Path:
    cwd = tmp_path_factory.mktemp("sweep")
    done = run_cli(
        "-m",
        f"system={','.join(sorted(METHODS))}",
        "dataset=vistory_fixture",
        "dataset.language=en,ch",
        "image.guidance=2.5,3.5",
        f"evaluation.metrics=[{METRICS}]",
        *QUIET,
        cwd=cwd,
        env=site,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return cwd / "outputs" / "sweeps" / "vistory_fixture"


def read_board(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, encoding="utf-8-sig", keep_default_na=False, na_values=[""])


def ours(board: pd.DataFrame) -> pd.DataFrame:
    return board[board["model"] == METHOD]


def test_the_sweep_ends_with_the_task_report_ranked_among_the_published(sweep: Path) -> None:
    report = sweep / "report"
    html = (report / "index.html").read_text(encoding="utf-8")
    assert "<title>ViStoryBench report</title>" in html
    board = read_board(report / "leaderboard.csv")
    assert list(board.columns[:10]) == OFFICIAL_HEADERS
    # four runs (en, ch) x (two parameter sets): one method, ranked once per split, its best mode
    mine = ours(board)
    assert sorted(mine["split"]) == ["full", "lite"]
    assert set(mine["mode"]) <= MODES and set(mine["source"]) == {"ours"}
    assert all(
        s.startswith("not comparable: ") and "a stand-in" in s for s in mine["metric_settings"]
    )
    # among the published methods of both splits, unchanged
    published = board[board["source"] == "published"]
    assert set(published["metric_settings"]) == {"published"}
    assert {"UNO", "OmniGen2"} <= set(published["model"])
    assert len(published[published["split"] == "lite"]) == 24  # every published lite method
    # the paper's names on the page
    for name in ("CIDS Cross", "CSD Self", "Character Interaction", "Individual Action"):
        assert name in html


def test_our_runs_are_averaged_per_method_and_mode_as_officially(
    sweep: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ours"
    done = run_cli(
        *("report", "--run-dir", str(sweep), "--scores", str(sweep / "scores.jsonl")),
        *("--no-published", "--no-html", "--out", str(out)),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    board = read_board(out / "leaderboard.csv")
    assert set(board["model"]) == METHODS
    means = pd.read_csv(out / "run_means_official.csv", encoding="utf-8-sig")
    full = means[means["split"] == "full"]
    # each (method, mode) row is the mean of its en and ch runs
    for row in board[board["split"] == "full"].itertuples():
        runs = full[(full["method"] == row.model) & (full["mode"] == row.mode)]
        assert sorted(runs["language"]) == ["ch", "en"]
        assert row.cids_cross_mean == pytest.approx(runs["cids_cross_mean"].mean())
        assert row.inception_score == pytest.approx(runs["inception_score"].mean())


def _exported_records(path: Path, split: str) -> list[dict[str, Any]]:
    """An official ``bench_results_<split>.csv`` read independently: ``model`` holds the mode
    and ``mode`` the language, the metric columns ``metrics.<evaluator>.metrics.<key>``."""
    records = []
    with path.open(encoding="utf-8-sig", newline="") as fh:
        for row in csv.DictReader(fh):
            record: dict[str, Any] = {
                "split": split,
                "method": row["method"],
                "mode": row["model"],
                "language": row["mode"],
                "timestamp": row["timestamp"],
            }
            for column, text in row.items():
                if column.startswith("metrics."):
                    record[column.split(".")[-1]] = float(text) if text else math.nan
            records.append(record)
    return records


def test_export_writes_the_official_formats_and_ranks_as_our_leaderboard(
    sweep: Path, tmp_path: Path, site: dict[str, str]
) -> None:
    out = tmp_path / "export"
    done = run_cli("export", "--task", "vistorybench", str(sweep), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    runs = sorted(p.parent for p in (out / "bench_results").rglob("summary.json"))
    assert len(runs) == 8
    for run in runs:
        method, mode, language, _ = run.relative_to(out / "bench_results").parts
        assert method in METHODS and mode in MODES and language in ("en", "ch")
        meta = json.loads((run / "metadata.json").read_text(encoding="utf-8"))
        assert meta["run"]["method"] == method and meta["run"]["language"] == language
        for evaluator in ("cids", "csd", "aesthetic", "prompt_align"):
            stories = json.loads((run / "metrics" / evaluator / "story_results.json").read_text())
            assert sorted(stories) == ["01", "02"]
            assert stories["01"]["status"] == "complete" and stories["01"]["metrics"]
        scores = json.loads((run / "metrics" / "diversity" / "scores.json").read_text())
        assert scores["scope"] == {"level": "dataset"} and "inception_score" in scores["metrics"]
        items = (run / "metrics" / "prompt_align" / "items.jsonl").read_text().splitlines()
        assert json.loads(items[0])["metric"]["name"] == "prompt_align"
    ours_out = tmp_path / "ours"
    assert (
        run_cli(
            *("report", "--run-dir", str(sweep), "--scores", str(sweep / "scores.jsonl")),
            *("--no-published", "--no-html", "--out", str(ours_out)),
            cwd=tmp_path,
        ).returncode
        == 0
    )
    board = read_board(ours_out / "leaderboard.csv")
    # the official rules, implemented independently, over what we exported
    records = _exported_records(out / "bench_results_lite.csv", "lite")
    records += _exported_records(out / "bench_results_full.csv", "full")
    for row in records:
        assert row["method"] in METHODS and row["mode"] in MODES
    expected = _ref_leaderboard(records, None, True)
    got = [
        (r.split, r.model, r.mode, int(r.overall_rank), r.inception_score, r.cids_self_mean)
        for r in board.itertuples()
    ]
    # expected rows: (split, method, mode, 5 category ranks, overall, SHOWN_METRICS...)
    shown = list(lb.SHOWN_METRICS)
    want = [
        (e[0], e[1], e[2], e[8], e[9 + shown.index("inception_score")],
         e[9 + shown.index("cids_self_mean")])
        for e in expected
    ]  # fmt: skip
    assert len(got) == len(want) == 4  # two methods on two splits
    for mine, theirs in zip(sorted(got, key=str), sorted(want, key=str), strict=True):
        assert mine[:4] == theirs[:4]  # split, method, its chosen mode, overall rank
        assert mine[4:] == pytest.approx(theirs[4:])

    # --outputs of the same images gives the same leaderboard as the job directories
    scored = tmp_path / "tree-evaluation"
    done = run_cli(
        *("evaluate", "--task", "vistorybench", "--outputs", str(out / "outputs")),
        *("dataset=vistory_fixture", str(scored), "--metrics", METRICS, "--no-progress"),
        cwd=tmp_path,
        env=site,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<title>ViStoryBench report</title>" in (scored / "report" / "index.html").read_text()
    tree_board = tmp_path / "tree-board"
    assert (
        run_cli(
            *("report", "--run-dir", str(scored), "--scores", str(scored / "scores.jsonl")),
            *("--no-published", "--no-html", "--out", str(tree_board)),
            cwd=tmp_path,
        ).returncode
        == 0
    )
    mine = read_board(tree_board / "leaderboard.csv").drop(columns=["metric_settings"])
    pd.testing.assert_frame_equal(mine, board.drop(columns=["metric_settings"]))


def test_a_report_that_cannot_be_built_is_one_line_and_exit_1(
    sweep: Path, tmp_path: Path, site: dict[str, str]
) -> None:
    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    job = next(p.parent for p in copy.glob("*/manifest.json"))
    (job / "records.jsonl").write_text("{}\n", encoding="utf-8")
    done = run_cli(
        "evaluate", str(copy), "--metrics", "csd", "--no-progress", cwd=tmp_path, env=site
    )
    assert done.returncode == 1
    failed = [line for line in done.stderr.splitlines() if "report failed" in line]
    assert len(failed) == 1 and "records.jsonl:1" in failed[0], done.stderr[-2000:]


def test_a_stand_in_result_is_never_served_to_the_real_metric(
    sweep: Path, tmp_path: Path, site: dict[str, str]
) -> None:
    job = tmp_path / "job"
    shutil.copytree(next(p.parent for p in sweep.glob("*/manifest.json")), job)
    garbage = tmp_path / "inception_v3_google-0cc3c7bd.pth"
    garbage.write_bytes(b"not a checkpoint")
    args = ("evaluate", str(job), "--metrics", "diversity", "--no-report", "--no-progress")
    flag = ("--set", f"metric.diversity.checkpoint={garbage}")
    assert run_cli(*args, *flag, cwd=tmp_path, env=site).returncode == 0  # the stand-in: ok
    real = run_cli(*args, *flag, cwd=tmp_path)  # the real metric opens the file and fails
    assert real.returncode == 1, real.stderr[-2000:]
    lines = [json.loads(x) for x in (job / "scores.jsonl").read_text().splitlines()]
    statuses = {r["status"] for r in lines if r["evaluator"] == "diversity"}
    assert statuses == {"error"}


def test_official_settings_are_told_from_departures() -> None:
    from omnistory_vistorybench import comparability as cmp

    defaults = cmp.declared_defaults()
    weights = {
        "cids": {
            "clip_model": "/w/openai/clip-vit-large-patch14",
            "arcface_weights": "/w/models/antelopev2/glintr100.onnx",
            "facenet_weights": "/w/facenet/20180402-114759-vggface2.pt",
            "adaface_weights": "/w/adaface/adaface_ir101_webface12m.ckpt",
            "judge_base_url": "https://api.openai.com/v1",
        },
        "csd": {"checkpoint": "/w/csd/csd_vit-large.pth"},
        "aesthetic": {"head": "/w/aesthetic_predictor/aesthetic_predictor_v2_5.pth"},
        "diversity": {},
        "prompt_align": {},
    }
    from omnistory_vistorybench.metrics import metric_classes

    # what evaluate records of each metric: its output parameters (the files need not exist)
    evaluators = {
        f"metric/{cls.name}": {
            "params": cls(**weights[cls.name]).output_params(),
            "stand_in": False,
        }
        for cls in metric_classes()
    }
    used = {"run": set(evaluators)}
    assert cmp.settings_of(["run"], used, evaluators, defaults) == cmp.OFFICIAL
    evaluators["metric/prompt_align"]["params"]["model"] = "qwen3-vl-8b"
    evaluators["metric/csd"]["params"]["checkpoint"] = "/w/csd_vit-tiny.pth"
    del used["run"]  # and no aesthetic scored
    used["run"] = {k for k in evaluators if k != "metric/aesthetic"}
    got = cmp.settings_of(["run"], used, evaluators, defaults)
    assert got.startswith(f"{cmp.NOT_COMPARABLE}: ")
    for reason in (
        "prompt_align.model=qwen3-vl-8b (official: gpt-4.1)",
        "csd.checkpoint=csd_vit-tiny.pth (official: csd_vit-large.pth)",
        "aesthetic not scored",
    ):
        assert reason in got
