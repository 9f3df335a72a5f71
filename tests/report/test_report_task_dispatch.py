"""``report`` dispatches on the task: a task with its own report (ViStoryBench) builds it, named by
``--task`` or by the run directory's job manifests; every other run gets the Omni-StoryBench
report as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from omnistory_report.command import job_tasks, main


def _vistory_job(run_dir: Path, system: str = "vsys") -> Path:
    job = run_dir / system
    job.mkdir(parents=True)
    manifest = {"task": {"name": "vistorybench", "version": "1"}, "system_id": system}
    (job / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return job


def test_omni_run_gets_the_omni_report_with_or_without_task(synthetic_run, tmp_path, capsys):
    # Omni manifests name no task: the default task, whose report is the Omni one
    assert job_tasks(synthetic_run.run_dir) == ["omnistorybench"]
    for extra, out in (([], "r1"), (["--task", "omnistorybench"], "r2")):
        argv = ["--scores", str(synthetic_run.scores), "--run-dir", str(synthetic_run.run_dir)]
        assert main([*argv, "--out", str(tmp_path / out), "--bootstrap", "10", *extra]) == 0
        board = pd.read_csv(tmp_path / out / "leaderboard.csv")
        # the Omni leaderboard, not ViStoryBench's
        assert {"system", "total", "judge_omni"} <= set(board.columns)
        assert "overall_rank" not in board.columns
        assert (tmp_path / out / "index.html").is_file()
    capsys.readouterr()


def test_omni_report_still_requires_scores_and_refuses_bench_results(synthetic_run, tmp_path):
    with pytest.raises(SystemExit) as info:
        main(["--out", str(tmp_path / "r"), "--run-dir", str(synthetic_run.run_dir)])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(
            [
                "--scores",
                str(synthetic_run.scores),
                "--bench-results-csv",
                str(tmp_path / "x.csv"),
                "--out",
                str(tmp_path / "r"),
            ]
        )
    assert info.value.code == 2


def test_a_run_of_two_tasks_needs_task(synthetic_run, tmp_path, capsys):
    mixed = tmp_path / "mixed"
    shutil.copytree(synthetic_run.run_dir, mixed)
    _vistory_job(mixed)
    assert job_tasks(mixed) == ["omnistorybench", "vistorybench"]
    status = main(["--scores", str(synthetic_run.scores), "--run-dir", str(mixed), "--out", "r"])
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "several tasks" in err and "--task" in err


def test_manifests_naming_vistorybench_build_its_report(tmp_path, capsys):
    run = tmp_path / "run"
    _vistory_job(run)
    out = tmp_path / "r"
    assert main(["--run-dir", str(run), "--out", str(out)]) == 0
    header = (out / "leaderboard.csv").read_text(encoding="utf-8-sig").splitlines()[0]
    assert header.startswith("Method,model,mode,Character Consistency(CRef)_rank,")
    assert "No scores yet" in (out / "index.html").read_text(encoding="utf-8")
    assert "report written to" in capsys.readouterr().out


def test_unknown_task_is_one_line_exit_2(tmp_path, capsys):
    assert main(["--task", "nope", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no task named 'nope'" in err
