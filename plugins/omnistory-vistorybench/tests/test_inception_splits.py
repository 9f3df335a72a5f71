"""The Inception Score per split, as the official recomputes it for ``bench_results_lite.csv``.

A full run (the fixture's story 01 is lite, 02 is not) is scored twice by ``diversity``: over
every image (``example_id ""``) and over its lite stories' images (``example_id "lite"``); the
report ranks the full split on the first and the lite split on the second.  A lite run keeps
one run unit.  The Inception v3 is a random state dict built here, loaded by the metric's own
loading code; everything else goes through the real command line.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from omnistory_testkit import run_cli
from omnistory_vistorybench.evaluation import LITE_RUN_UNIT, task_evaluation
from omnistory_vistorybench.layout import read_outputs

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).parent / "metrics"))
from vsb_metric_images import media_of  # noqa: E402

QUIET = ("engine.progress=false",)
JOB = Path("outputs", "runs", "vistory_fixture", "copy_paste")


@pytest.fixture(scope="module")
def inception(tmp_path_factory) -> Path:
    """A random Inception v3 state dict whose outputs depend on its inputs (the metric tests'
    recipe), saved under the official file name."""
    from omnistory_vistorybench.metrics._inception_net import build_inception_v3

    torch.manual_seed(0)
    net = build_inception_v3()
    for module in net.modules():
        if isinstance(module, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
        elif isinstance(module, torch.nn.Linear):
            torch.nn.init.normal_(module.weight, std=0.05)
    path = tmp_path_factory.mktemp("inception") / "inception_v3_google-0cc3c7bd.pth"
    torch.save(net.state_dict(), path)
    return path


def flags(checkpoint: Path) -> list[str]:
    values = {"checkpoint": checkpoint, "device": "cpu", "backend": "builtin"}
    return [a for k, v in values.items() for a in ("--set", f"metric.diversity.{k}={v}")]


def run(cwd: Path, *args: str) -> Any:
    done = run_cli(*args, cwd=cwd)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def generate(cwd: Path, *extra: str) -> Path:
    cwd.mkdir(parents=True, exist_ok=True)
    run(cwd, "task=vistorybench", "dataset=vistory_fixture", "system=copy_paste", *QUIET, *extra)
    # the job of a lite run has its own directory (copy_paste-lite)
    return cwd / JOB.with_name(JOB.name + ("-lite" if "dataset.split=lite" in extra else ""))


def diversity_rows(job: Path) -> dict[str, dict[str, Any]]:
    lines = (job / "scores.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    return {r["example_id"]: r for r in rows if r["evaluator"] == "diversity"}


def calls(job: Path) -> dict[str, int]:
    stats = json.loads((job / "evaluation_stats.json").read_text(encoding="utf-8"))
    return stats["components"]["metric/diversity"]


def score_of(checkpoint: Path, images: list[Path]) -> float:
    """The metric itself over ``images``: what a run unit over exactly them must score."""
    from omnistory_vistorybench.metrics.inception import InceptionScoreMetric

    metric = InceptionScoreMetric(checkpoint=str(checkpoint), device="cpu", backend="builtin")
    metric.load()
    (result,) = metric.run_batch([{"candidate_images": [media_of(p) for p in images]}])
    assert result.status == "ok" and result.detail["images"] == len(images)
    return float(result.scores["inception_score"])


def read_csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, encoding="utf-8-sig")


# -- units -----------------------------------------------------------------------------------------
def test_a_full_run_has_a_lite_run_unit_and_a_lite_run_one(tmp_path: Path) -> None:
    full = generate(tmp_path / "full")
    lite = generate(tmp_path / "lite", "dataset.split=lite")
    (outputs,) = read_outputs(full / "outputs").values()
    every = sorted(str(p) for s in outputs.stories.values() for p in s.shots.values())
    story_01 = sorted(str(p) for p in outputs.stories["01"].shots.values())

    units = {u.example_id: u for u in task_evaluation([full]).scoped("run")}
    assert sorted(units) == ["", LITE_RUN_UNIT]
    assert sorted(m.path for m in units[""].pool["candidate_images"]) == every
    assert sorted(m.path for m in units["lite"].pool["candidate_images"]) == story_01
    assert len(story_01) < len(every) and not units["lite"].missing

    (only,) = task_evaluation([lite]).scoped("run")
    assert only.example_id == "" and only.pool["candidate_images"]

    # a full run whose lite stories produced nothing: its lite unit lacks its images
    shutil.rmtree(outputs.stories["01"].path)
    units = {u.example_id: u for u in task_evaluation([full]).scoped("run")}
    assert units["lite"].missing == {"candidate_images"} and not units[""].missing


# -- evaluate, then report ---------------------------------------------------------------------
@pytest.mark.slow
def test_the_lite_leaderboard_of_a_full_run_uses_its_lite_inception_score(
    tmp_path: Path, inception: Path
) -> None:
    job = generate(tmp_path)
    args = ["evaluate", str(job), "--metrics", "diversity", *flags(inception)]
    run(tmp_path, *args, "--no-report", "--no-progress")
    rows, first = diversity_rows(job), calls(job)
    run(tmp_path, *args, "--no-report", "--no-progress")
    again, second = diversity_rows(job), calls(job)

    # two run rows, each the metric over exactly its images
    assert sorted(rows) == ["", "lite"]
    assert all((r["scope"], r["status"]) == ("run", "ok") for r in rows.values())
    (outputs,) = read_outputs(job / "outputs").values()
    every = [p for s in outputs.stories.values() for p in s.shots.values()]
    lite = list(outputs.stories["01"].shots.values())
    full_is, lite_is = rows[""]["score"], rows["lite"]["score"]
    assert full_is == pytest.approx(score_of(inception, every), rel=1e-6)
    assert lite_is == pytest.approx(score_of(inception, lite), rel=1e-6)
    assert abs(full_is - lite_is) > 1e-3  # 9 images against story 01's 6
    assert first["calls"] == 2
    # the re-run: both from the store, no load, no call, the same rows
    assert (second["calls"], second["loads"]) == (0, 0) and again == rows

    out = tmp_path / "report"
    report = ["report", "--scores", str(job / "scores.jsonl"), "--run-dir", str(job)]
    report.append("--no-published")  # ours alone: one row per split
    run(tmp_path, *report, "--out", str(out))
    for policy in ("official", "valid_only", "zero_filled"):
        table = read_csv(out / f"run_means_{policy}.csv").set_index("split")
        assert table.loc["full", "inception_score"] == pytest.approx(full_is), policy
        assert table.loc["lite", "inception_score"] == pytest.approx(lite_is), policy
    assert read_csv(out / "leaderboard_full.csv")["inception_score"].tolist() == pytest.approx(
        [full_is]
    )
    assert read_csv(out / "leaderboard_lite.csv")["inception_score"].tolist() == pytest.approx(
        [lite_is]
    )
    values = pd.read_csv(
        out / "story_values.csv", encoding="utf-8-sig", dtype={"story_id": str, "split": str}
    ).fillna({"split": "", "story_id": ""})
    runs = values[values["story_id"] == ""].set_index("split")["valid"]
    assert runs.to_dict() == pytest.approx({"": full_is, "lite": lite_is})
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "computed over its lite images" in html and "split-fallback" not in html

    # scores written before lite rows existed: the lite split takes the whole run's, and says so
    old = tmp_path / "old.jsonl"
    kept = [
        line
        for line in (job / "scores.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line)["example_id"] != "lite"
    ]
    old.write_text("\n".join(kept) + "\n", encoding="utf-8")
    run(
        tmp_path,
        *("report", "--scores", str(old), "--run-dir", str(job), "--no-published"),
        *("--out", "old-report"),
    )
    board = read_csv(tmp_path / "old-report" / "leaderboard_lite.csv")
    assert board["inception_score"].tolist() == pytest.approx([full_is])
    html = (tmp_path / "old-report" / "index.html").read_text(encoding="utf-8")
    assert "inception_score on split lite is the whole run&#x27;s value" in html
