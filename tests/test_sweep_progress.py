"""The sweep's progress view: per component calls done / to do, cache hits, failures, ETA, drawn
from files the jobs write in the sweep directory, so it is the same whichever launcher runs them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from omnistory_testing import run_cli
from omnistory_testkit import VALID_PLAN, FakeServer, Reply

from omnistory_core.engine.sweep_progress import (
    JobProgress,
    announce_jobs,
    read_sweep_progress,
    render_sweep_progress,
    write_job_plan,
)


def test_to_do_counts_each_planned_call_once_whoever_makes_it(tmp_path: Path) -> None:
    announce_jobs(tmp_path, 3)
    # two jobs share the planner's calls a, b and the expert call x (planned under its upstream
    # call's name); job 1 also plans y and z, which turn out to be x again and nothing
    write_job_plan(tmp_path, 0, {"planner/p": ["a", "b"], "image/i": ["sym-x"]})
    write_job_plan(tmp_path, 1, {"planner/p": ["a", "b"], "image/i": ["sym-x", "y", "z"]})
    stats0 = {"planner/p": {"calls": 2, "cache_hits": 0, "failures": 1, "loads": 1}}
    stats1 = {"planner/p": {"calls": 0, "cache_hits": 2, "failures": 1, "loads": 0}}
    first = JobProgress(tmp_path, 0, "p-i", stats0, interval_s=60)
    second = JobProgress(tmp_path, 1, "p-i-2", stats1, interval_s=60)
    second.resolve("image/i", {"sym-x": "x", "y": "x", "z": None})  # z's plan failed
    first.close("done")
    second.close()
    progress = read_sweep_progress(tmp_path)
    assert progress.expected_jobs == 3 and progress.not_started == 1
    assert progress.jobs == {"done": 2}
    planner, image = progress.components["planner/p"], progress.components["image/i"]
    assert (planner.planned, planner.calls, planner.to_do) == (2, 2, 0)
    assert (planner.cache_hits, planner.failures, planner.loads) == (2, 2, 1)
    assert (image.planned, image.calls, image.to_do) == (1, 0, 1)

    from rich.console import Console

    console = Console(width=120, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(render_sweep_progress(progress, "sweep x"))
    text = console.export_text()
    assert "sweep x: jobs 2 done, 0 running, 1 not started" in text
    assert "planner/p" in text and "image/i" in text


def _flaky_planner(body) -> Reply:
    """A valid plan for about half of the pages, unparseable JSON for the others (their image
    calls are never made)."""
    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).digest()
    return Reply(text=json.dumps(VALID_PLAN) if digest[0] % 2 else '{"narration": ')


def _total_row(text: str) -> list[str]:
    rows = [line.split() for line in text.splitlines() if line.startswith("total ")]
    assert rows, text[-3000:]
    return rows[-1]


def test_the_view_of_a_sweep_ends_exact_with_either_launcher(tmp_path: Path) -> None:
    with FakeServer(_flaky_planner) as server:
        sweep = (
            "-m",
            "planner=gpt",
            f"++planner.base_url={server.openai_base_url}",
            "image=noop,copy",
            "tts=noop",
            "dataset.limit=6",
            "output_root=out",
            "evaluation.report=false",
            "engine.progress=true",
        )
        env = {"OPENAI_API_KEY": "test-key"}
        proc = run_cli(*sweep, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        records = len(list((tmp_path / "out/store/calls").rglob("*.json")))
        # the final table (stderr is no terminal: no live redraws, the table once at the end)
        assert "sweep demo: jobs 2 done, 0 running" in proc.stderr
        total = _total_row(proc.stderr)
        assert total[1:3] == [str(records), "0"], total  # calls done = distinct calls; to do 0
        progress = read_sweep_progress(tmp_path / "out/sweeps/demo")
        stats = json.loads((tmp_path / "out/sweeps/demo/sweep_stats.json").read_text())
        for key, counts in stats["components"].items():
            row = progress.components[key]
            assert (row.calls, row.to_do, row.cache_hits) == (
                counts["calls"],
                0,
                counts["cache_hits"],
            ), key
            assert row.planned == counts["calls"], f"{key}: planned {row.planned}"
        failed = 6 - progress.components["image/noop"].calls
        assert failed > 0, "no plan failed: the test would not see a cancelled call"

        # another launcher: jobs in joblib workers; the view is drawn from the same files
        again = run_cli(*sweep, "sweep_name=again", "hydra/launcher=joblib", cwd=tmp_path, env=env)
        assert again.returncode == 0, again.stderr[-3000:]
        total = _total_row(again.stderr)
        assert total[1:3] == ["0", "0"], total  # all cached now

    shown = run_cli("progress", "out/sweeps/demo", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "sweep demo: jobs 2 done" in shown.stdout and "image/noop" in shown.stdout
    missing = run_cli("progress", "out/nowhere", cwd=tmp_path)
    assert missing.returncode == 2 and "has no .progress/ folder" in missing.stderr
