"""One schedule for a sweep's devices (``engine.scheduler``) and scoring while generation goes on
(``engine.evaluate_sooner``), through the real CLI on stand-in devices.

* The evaluation starts before generation ends, and ``scores.jsonl`` is byte-identical to the
  one of a sweep that scores everything after its last job (``engine.evaluate_sooner=false``),
  with the same calls and cache hits counted and no call made twice.
* A component whose remaining work is less than one load is not spread: jobs that share it use
  one replica, loaded once, on one device.
* While the hosted planners make the first plans, the experts' models are pre-loaded on devices
  no stage needs, and the experts' stages then use those replicas (loads = pairs).
* ``kill -9`` of the scheduler mid-sweep: every stage goes on leasing devices on its own; nothing
  is lost (every output and score is there, a rerun makes no call) and no call is made twice.

Devices are names standing in for GPUs, the models, metrics and judges the testkit's stand-ins
(which log every call's start and end, and every load)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from devices_testing import alive, job_outputs, lines, standin_env
from omnistory_testkit import run_cli

LIMIT = 4
GRID = ("-m", "planner=claude,gpt", "image=kontext", "tts=parler")
JOBS = ("claude-kontext-parler", "gpt-kontext-parler")
EVALUATORS = {"metric/clip", "judge/text-qwen3-30b-a3b"}
EVALUATION = (
    "evaluation.metrics=[clip]",
    "evaluation.judges=[text-qwen3-30b-a3b]",
    # one item per chunk: the stages are cut as finely as a sweep's devices can share them
    "evaluation.overrides=['metric.clip.batch_size=1','judge.text-qwen3-30b-a3b.batch_size=1']",
)
COMMON = (
    f"dataset.limit={LIMIT}",
    "output_root=out",
    "sweep_name=s",
    "engine.progress=false",
    "evaluation.report=false",
)
SWEEP = Path("out/sweeps/s")
#: calls of 0.2 s and loads of 2 s: no component has a load's worth of work (8 calls each)
CALL_S, LOAD_S = 0.2, 2.0
#: the planners (hosted: no device) take longer per plan than the experts, so the devices have
#: room while plans come, as in a sweep with hosted planners
PLAN_S = 2.0


def _env(root: Path) -> dict[str, str]:
    env = standin_env(root, CALL_S, load_s=LOAD_S, evaluators=True)
    env["OMNISTORY_STANDIN_DELAYS"] = json.dumps({"planner/claude": PLAN_S, "planner/gpt": PLAN_S})
    return env


def _is_evaluator(entry: dict) -> bool:
    return entry["component"].split("/")[0] in ("metric", "judge")


def _evaluation_stats(root: Path) -> dict:
    stats = json.loads((root / SWEEP / "evaluation_stats.json").read_text())["components"]
    return {k: (v["calls"], v["cache_hits"]) for k, v in stats.items()}


@pytest.mark.slow(seconds=30)
def test_scores_start_before_generation_ends_and_match_the_scores_after_it(
    tmp_path: Path,
) -> None:
    sooner, later = tmp_path / "sooner", tmp_path / "later"
    for root, extra in ((sooner, ()), (later, ("engine.evaluate_sooner=false",))):
        root.mkdir()
        proc = run_cli(
            *GRID, *COMMON, *EVALUATION, "engine.devices=[0,1]", *extra,
            cwd=root, env=_env(root),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]

    # the same scores, byte for byte, from the same calls (each made once) and cache hits
    assert (sooner / SWEEP / "scores.jsonl").read_bytes() == (
        later / SWEEP / "scores.jsonl"
    ).read_bytes()
    assert _evaluation_stats(sooner) == _evaluation_stats(later)
    assert job_outputs(sooner / SWEEP, JOBS) == job_outputs(later / SWEEP, JOBS)
    for root in (sooner, later):
        calls = lines(root / "calls.jsonl")
        made = Counter(c["digest"] for c in calls)
        assert max(made.values()) == 1, "a call was made twice"
        assert {c["component"] for c in calls if _is_evaluator(c)} == EVALUATORS

    # scoring began while generation went on, not after its last call
    def first_score_and_last_generation(root: Path) -> tuple[float, float]:
        calls = lines(root / "calls.jsonl")
        first = min(c["start"] for c in calls if _is_evaluator(c))
        return first, max(c["end"] for c in calls if not _is_evaluator(c))

    first, last = first_score_and_last_generation(sooner)
    assert first < last, "no item was scored before generation ended"
    first, last = first_score_and_last_generation(later)
    assert first > last

    # no component had a load's worth of work: each was loaded once, on one device, though
    # two jobs used each expert and both evaluators scored both systems
    loads = Counter(e["component"] for e in lines(sooner / "loads.jsonl"))
    assert loads == Counter({c: 1 for c in ("image/kontext", "tts/parler", *EVALUATORS)})
    stats = json.loads((sooner / SWEEP / "sweep_stats.json").read_text())
    assert all(len(per) == 1 for per in stats["loads_by_device"].values()), stats


def _killed_scheduler_sweep(root: Path) -> tuple[subprocess.Popen, int, float]:
    """A sweep on the three devices it sees whose scheduler is killed (SIGKILL) once GPU calls
    run: the sweep, the scheduler's pid and when it was killed."""
    sweep = subprocess.Popen(
        [
            sys.executable, "-m", "omnistory_core",
            "-m", "planner=claude", "image=kontext,dev", "tts=parler,voxcpm",
            # auto: the GPUs the sweep's process sees, as every job it starts must see them
            *COMMON, "evaluation.metrics=[clip]", "engine.devices=auto",
        ],
        cwd=root,
        env={
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "CUDA_VISIBLE_DEVICES": "0,1,2",
            **standin_env(root, 0.4, evaluators=True),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )  # fmt: skip
    registration = root / SWEEP / ".pool/scheduler.json"
    deadline = time.time() + 120
    while time.time() < deadline:
        assert sweep.poll() is None, "the sweep ended before any GPU call"
        calls = lines(root / "calls.jsonl")
        if registration.exists() and any(c["devices"] and c["gpus"] for c in calls):
            pid = int(json.loads(registration.read_text())["pid"])
            os.kill(pid, signal.SIGKILL)
            return sweep, pid, time.time()
        time.sleep(0.05)
    os.killpg(sweep.pid, signal.SIGKILL)
    raise AssertionError("no GPU call within 120 s")


def test_a_killed_scheduler_loses_nothing_and_computes_nothing_twice(tmp_path: Path) -> None:
    jobs = ("claude-kontext-parler", "claude-kontext-voxcpm", "claude-dev-parler")
    jobs += ("claude-dev-voxcpm",)
    sweep, scheduler, killed = _killed_scheduler_sweep(tmp_path)
    try:
        out, _ = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait()
    assert sweep.returncode == 0, out[-4000:]
    assert not alive(scheduler)

    calls = lines(tmp_path / "calls.jsonl")
    made = Counter(c["digest"] for c in calls)
    assert max(made.values()) == 1, "a call was made twice"
    assert any(c["end"] > killed and c["gpus"] for c in calls), "no GPU call after the kill"
    # every job, also those started after the evaluation's stream, ran its GPU calls on them
    assert {c["devices"] for c in calls if c["gpus"]} <= {"0", "1", "2"}
    # nothing lost: every output of every job, every score, and a rerun has nothing to make
    assert len(job_outputs(tmp_path / SWEEP, jobs)) == 3 * LIMIT * len(jobs)
    rows = [json.loads(r) for r in (tmp_path / SWEEP / "scores.jsonl").read_text().splitlines()]
    assert len({(r["system"], r["example_id"]) for r in rows}) == LIMIT * len(jobs)
    assert {r["status"] for r in rows} == {"ok"}
    records = len(list((tmp_path / "out/store/calls").rglob("*.json")))
    assert records == len(made)

    # the same sweep planned (a dry run, in one process) has nothing left to make
    rerun = run_cli(
        "-m", "planner=claude", "image=kontext,dev", "tts=parler,voxcpm",
        *COMMON, "evaluation.metrics=[clip]", "engine.devices=none", "engine.dry_run=true",
        cwd=tmp_path, env=standin_env(tmp_path, 0.0, evaluators=True),
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    plan = json.loads((tmp_path / SWEEP / "sweep_plan.json").read_text())
    assert plan["total"]["calls"] == 0 and "metric/clip" in plan["components"], plan["total"]
    assert len(lines(tmp_path / "calls.jsonl")) == len(calls)


def test_a_task_with_its_own_evaluation_is_scored_as_its_jobs_end(tmp_path: Path) -> None:
    """ViStoryBench, whose evaluation reads whole job directories (stories, runs): each job's
    units are scored once its job is done, on the sweep's device, and the scores are those of
    the evaluation after the last job, byte for byte."""
    from omnistory_testkit.standins import make_standin_site

    site = make_standin_site(tmp_path / "standins", evaluators=True, models=False)
    sweep = (
        "-m", "task=vistorybench", "system=copy_paste", "dataset=vistory_fixture",
        "evaluation.metrics=[csd,diversity]", "engine.devices=[0]",
        "output_root=out", "sweep_name=s", "engine.progress=false", "evaluation.report=false",
    )  # fmt: skip
    outputs = {}
    for mode in ("true", "false"):
        root = tmp_path / mode
        root.mkdir()
        env = {
            "PYTHONPATH": str(site),
            "OMNISTORY_STANDIN_LOG": str(root / "calls.jsonl"),
            "OMNISTORY_STANDIN_LOAD_LOG": str(root / "loads.jsonl"),
            "OMNISTORY_DEVICE_LOCKS": str(root / "device-locks"),
        }
        proc = run_cli(*sweep, f"engine.evaluate_sooner={mode}", cwd=root, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        calls = Counter(c["digest"] for c in lines(root / "calls.jsonl"))
        assert calls and max(calls.values()) == 1, "a call was made twice"
        # each run is labelled by its own timestamp (<method>/<mode>/<lang>/<YYYYMMDD_HHMMSS>)
        scores = re.sub(rb"/\d{8}_\d{6}\b", b"/<ts>", (root / SWEEP / "scores.jsonl").read_bytes())
        assert scores.count(b"/<ts>") == scores.count(b"\n"), "a row without its run's timestamp"
        outputs[mode] = scores, _evaluation_stats(root)
        made = "metric/csd: 2 call(s) made while the sweep ran (evaluate sooner)"
        assert (made in proc.stdout + proc.stderr) is (mode == "true")
    assert outputs["true"] == outputs["false"]


def test_experts_load_while_their_first_plans_are_made_and_use_those_replicas(
    tmp_path: Path,
) -> None:
    """A pre-load: while the jobs' hosted planners make the first plans, the scheduler loads the
    experts on devices no stage needs, and the experts' stages then run there: no model loaded
    twice on a device nor anywhere its component makes no call, no call made twice."""
    env = standin_env(tmp_path, CALL_S, load_s=LOAD_S)
    # planners slow enough that the sweep's watch tells the scheduler the experts' work to come
    # before the first plan is done
    env["OMNISTORY_STANDIN_DELAYS"] = json.dumps({"planner/claude": 3.0, "planner/gpt": 3.0})
    proc = run_cli(
        "-m", "planner=claude,gpt", "image=kontext", "tts=parler",
        *COMMON, "engine.devices=[0,1]", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = lines(tmp_path / "calls.jsonl")
    assert max(Counter(c["digest"] for c in calls).values()) == 1, "a call was made twice"
    loads = lines(tmp_path / "loads.jsonl")
    first_plan = min(c["end"] for c in calls if c["component"].startswith("planner/"))
    early = {e["component"] for e in loads if e["start"] < first_plan}
    assert early == {"image/kontext", "tts/parler"}, loads
    log = (tmp_path / SWEEP / ".pool/scheduler.log").read_text()
    assert "(pre-load" in log, log
    # each load on its own (component, device), and each used there by the component's calls
    pairs = Counter((e["component"], e["devices"]) for e in loads)
    assert max(pairs.values()) == 1, pairs
    used = {(c["component"], c["devices"]) for c in calls if c["gpus"]}
    assert set(pairs) <= used, (pairs, used)
    assert len(job_outputs(tmp_path / SWEEP, JOBS)) == 3 * LIMIT * len(JOBS)
