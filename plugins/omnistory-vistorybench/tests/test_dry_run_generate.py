"""``engine.dry_run=true`` on ViStoryBench jobs, through the real command line on the fixture.

A dry run plans a job without loading or calling any model: per stage the calls still to make
and those the store holds, keyed as the run keys them, so the run makes exactly the calls the
dry run counted and a dry run after it finds none left.  Sweeps deduplicate a shared planner's
calls, count a group-unit expert once per story, price a hosted planner, and plan the
end-of-sweep evaluation of the jobs they planned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from omnistory_testkit import run_cli

#: the story.json indices of the fixture's usable shots (01 shot 6 lacks a field)
USABLE = {"01": [1, 2, 3, 4, 5, 7], "02": [1, 2, 3]}
SHOTS = sum(len(v) for v in USABLE.values())
QUIET = ("engine.progress=false",)
BASE = ("task=vistorybench", "dataset=vistory_fixture", *QUIET)


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    done = run_cli(*args, cwd=cwd, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def job_dir(cwd: Path, system: str) -> Path:
    return cwd / "outputs" / "runs" / "vistory_fixture" / system


def sweep_dir(cwd: Path) -> Path:
    return cwd / "outputs" / "sweeps" / "vistory_fixture"


def counts(plan: dict[str, Any], key: str) -> tuple[int, int, int]:
    row = plan["components"][key]
    return row["calls"], row["cached"], row["loads"]


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_a_dry_run_counts_the_calls_the_run_makes_and_none_after_it(tmp_path: Path) -> None:
    job = job_dir(tmp_path, "copy_paste")
    before = run(tmp_path, *BASE, "system=copy_paste", "engine.dry_run=true")
    plan = read_json(job / "sweep_plan.json")
    to_make, cached, loads = counts(plan, "image/copy_paste")
    assert (cached, loads) == (0, 1) and 0 < to_make <= SHOTS
    assert "image/copy_paste" in before.stdout and "nothing called" in before.stdout
    # nothing but the plan: no image, record or manifest, nothing in the store
    assert not (job / "manifest.json").exists() and not (job / "outputs").exists()
    assert files_under(tmp_path / "outputs" / "store") == []

    run(tmp_path, *BASE, "system=copy_paste")
    made = read_json(job / "stats.json")["components"]["image/copy_paste"]
    assert made["calls"] == to_make  # the run made exactly the calls planned
    assert made["calls"] + made["cache_hits"] == SHOTS

    run(tmp_path, *BASE, "system=copy_paste", "engine.dry_run=true")
    after = read_json(job / "sweep_plan.json")
    assert counts(after, "image/copy_paste") == (0, to_make, 0)
    assert after["total"]["calls"] == 0


@pytest.mark.slow
def test_a_sweep_shares_the_planner_and_counts_a_group_expert_per_story(tmp_path: Path) -> None:
    sweep = ("-m", *BASE, "planner=template", "image=noop,sequential")
    run(tmp_path, *sweep, "engine.dry_run=true")
    plan = read_json(sweep_dir(tmp_path) / "sweep_plan.json")
    assert plan["jobs"] == 2
    # the planner's calls are the shots', once for both systems (one load)
    assert counts(plan, "planner/template") == (SHOTS, 0, 1)
    # an item expert: one call per shot (its prompt named by the planner call still to make)
    assert counts(plan, "image/noop") == (SHOTS, 0, 1)
    # a group-unit expert: one call per story
    assert counts(plan, "image/sequential") == (len(USABLE), 0, 1)
    for name in ("noop", "sequential"):
        job = read_json(sweep_dir(tmp_path) / name / "dry_run.json")
        assert job["task"] == "vistorybench" and len(job["candidates"]) == SHOTS
        assert all("pending" in c["image"] for c in job["candidates"])

    # the planner and noop run for real; their calls are then in the store
    run(tmp_path, *BASE, "planner=template", "image=noop")
    stats = read_json(job_dir(tmp_path, "noop") / "stats.json")["components"]
    assert stats["planner/template"]["calls"] == SHOTS and stats["image/noop"]["calls"] == SHOTS
    run(tmp_path, *sweep, "engine.dry_run=true")
    again = read_json(sweep_dir(tmp_path) / "sweep_plan.json")
    assert counts(again, "planner/template") == (0, SHOTS, 0)
    assert counts(again, "image/noop") == (0, SHOTS, 0)
    # the group expert now reads the stored plans' real prompts: still one call per story
    assert counts(again, "image/sequential") == (len(USABLE), 0, 1)


@pytest.mark.slow
def test_a_hosted_planner_is_priced_and_its_missing_key_listed(tmp_path: Path) -> None:
    prices = "++planner.prices={gpt-5: {input_per_mtok: 1.25, output_per_mtok: 10.0}}"
    env = {"OPENAI_API_KEY": ""}
    done = run(
        tmp_path,
        *BASE,
        "system=copy_paste",
        "planner=gpt",
        "++planner.model=gpt-5",
        "++planner.max_tokens=1000",
        prices,
        "engine.dry_run=true",
        env=env,
    )
    # a planner beside a preset and its settings are a derived mode: the job has its own folder
    [job] = [d for d in job_dir(tmp_path, "").iterdir() if not d.name.startswith(".")]
    assert job.name.startswith("copy_paste-base-")
    plan = read_json(job / "sweep_plan.json")
    row = plan["components"]["planner/gpt"]
    assert row["calls"] == SHOTS and row["cached"] == 0
    assert row["est_output_tokens"] == SHOTS * 1000  # max_tokens, an upper bound
    assert row["est_input_tokens"] > 0
    output_share = SHOTS * 1000 * 10.0 / 1e6
    assert row["est_cost_usd"] > output_share  # plus the prompts' input tokens
    assert plan["total"]["est_cost_usd"] == row["est_cost_usd"]
    (problem,) = plan["cannot_run_here"]
    assert "planner=gpt" in problem["problem"] and "OPENAI_API_KEY" in problem["problem"]
    assert "cannot run here" in done.stdout


@pytest.mark.slow
def test_a_sweep_dry_run_plans_the_evaluation_of_the_jobs_it_planned(tmp_path: Path) -> None:
    sweep = ("-m", *BASE, "system=copy_paste", "evaluation.metrics=[cids]")
    run(tmp_path, *sweep, "engine.dry_run=true")
    plan = read_json(sweep_dir(tmp_path) / "sweep_plan.json")
    row = plan["components"]["metric/cids"]
    # one CIDS call per story of the job still to run (its images all still to make)
    assert (row["stage"], row["scope"]) == ("evaluation", "group")
    assert (row["calls"], row["cached"], row["items"]) == (len(USABLE), 0, len(USABLE))
    assert row["missing_output"] == 0
    assert any("1 job(s) this dry run planned" in note for note in plan["notes"])
    assert not (sweep_dir(tmp_path) / "copy_paste" / "manifest.json").exists()


def test_a_single_run_notes_that_it_does_not_evaluate(tmp_path: Path) -> None:
    done = run(
        tmp_path, *BASE, "system=copy_paste", "evaluation.metrics=[cids]", "engine.dry_run=true"
    )
    plan = read_json(job_dir(tmp_path, "copy_paste") / "sweep_plan.json")
    assert "metric/cids" not in plan["components"]
    assert any("a single run does not evaluate" in note for note in plan["notes"])
    assert "single run does not evaluate" in " ".join(done.stdout.split())


def test_a_bad_plan_setting_is_one_line_and_exit_2(tmp_path: Path) -> None:
    args = (*BASE, "system=copy_paste", "engine.dry_run=true", "++engine.plan.gpus=0")
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("omnistory: error")]
    assert "engine.plan.gpus: expected an integer >= 1, got 0" in line
    assert not (job_dir(tmp_path, "copy_paste") / "sweep_plan.json").exists()
