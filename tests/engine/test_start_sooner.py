"""Start sooner (engine.start_sooner) and the release of pooled models no remaining job needs.

With the sweep's warm pool, a job's GPU experts start on the plans that exist while its planning
stage goes on: an expert call ends before the job's last planner call, and the outputs, the
store's records and the calls made are those of the strictly stage-major order
(``engine.start_sooner=false``).  A pool server whose component no job still to finish needs is
shut down then, not at the idle timeout or the sweep's end.  Devices are names standing in for
GPUs, the models the testkit's stand-ins (``OMNISTORY_STANDIN_LOG`` notes each call's end)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from devices_testing import job_outputs, lines, standin_env
from omnistory_testkit import run_cli

LIMIT = 6
COMMON = (
    f"dataset.limit={LIMIT}",
    "output_root=out",
    "engine.progress=false",
    "evaluation.report=false",
)
#: two planners, one image and one TTS expert: the second job finds both experts warm
GRID = ("-m", "planner=claude,gpt", "image=kontext", "tts=parler")
JOBS = ("claude-kontext-parler", "gpt-kontext-parler")
#: per planner: its plans, and an image and a speech call per plan
DISTINCT = 2 * 3 * LIMIT


def _sweep(root: Path, *extra: str, grid: tuple[str, ...] = GRID) -> None:
    proc = run_cli(*grid, *COMMON, *extra, cwd=root, env=standin_env(root, 0.4, load_s=0.2))
    assert proc.returncode == 0, proc.stderr[-3000:]


def _stats(root: Path) -> dict:
    return json.loads((root / "out/sweeps/demo/sweep_stats.json").read_text())


def _records(root: Path) -> dict[str, str]:
    """Every record of the store (its key's file -> its content)."""
    calls = root / "out/store/calls"
    return {str(p.relative_to(calls)): p.read_text() for p in sorted(calls.rglob("*.json"))}


def _record_outputs(records: dict[str, str]) -> dict[str, object]:
    """What the records hold, without their timings (a call's seconds differ run to run)."""
    out = {}
    for name, text in records.items():
        record = json.loads(text)
        record.pop("seconds", None)
        out[name] = record
    return out


@pytest.mark.slow(seconds=30)
def test_experts_start_before_planning_ends_with_the_stage_major_outputs(tmp_path: Path) -> None:
    sooner, later = tmp_path / "sooner", tmp_path / "later"
    sooner.mkdir()
    later.mkdir()
    _sweep(sooner, "engine.devices=[0]")
    _sweep(later, "engine.devices=[0]", "engine.start_sooner=false")

    sweep = Path("out/sweeps/demo")
    assert job_outputs(sooner / sweep, JOBS) == job_outputs(later / sweep, JOBS)
    assert len(job_outputs(sooner / sweep, JOBS)) == 3 * LIMIT * len(JOBS)
    assert _record_outputs(_records(sooner)) == _record_outputs(_records(later))
    assert len(_records(sooner)) == DISTINCT

    for root, overlaps in ((sooner, True), (later, False)):
        calls = lines(root / "calls.jsonl")
        digests = Counter(c["digest"] for c in calls)
        assert len(digests) == DISTINCT and max(digests.values()) == 1, "a call was made twice"
        # the second job (planner gpt) runs after the first: every expert call that ends after
        # its first plan is its own
        plans = sorted(c["end"] for c in calls if c["component"] == "planner/gpt")
        experts = [c["end"] for c in calls if c["component"] in ("image/kontext", "tts/parler")]
        early = [end for end in experts if plans[0] < end < plans[-1]]
        assert bool(early) is overlaps, (root.name, plans, sorted(experts))

    # what the jobs counted (calls, cache hits, failures, loads per component): the same
    assert _stats(sooner)["components"] == _stats(later)["components"]
    # the loads: each pooled model once on the device, with or without waves
    for root in (sooner, later):
        loads = Counter((e["component"], e["devices"]) for e in lines(root / "loads.jsonl"))
        assert loads == Counter({("image/kontext", "0"): 1, ("tts/parler", "0"): 1}), loads


def test_a_model_no_remaining_job_needs_is_released_before_the_sweep_ends(tmp_path: Path) -> None:
    """One device, one job after another: image=kontext only in the first job, so its server
    is shut down when that job ends, while the second job still runs; each (model, device) pair
    is loaded once all the same."""
    grid = ("-m", "planner=claude", "image=kontext,dev", "tts=parler")
    _sweep(tmp_path, "engine.devices=[0]", grid=grid)
    pool = tmp_path / "out/sweeps/demo/.pool"
    released = lines(pool / "released.jsonl")
    kontext = [r for r in released if r["component"] == "image/kontext"]
    assert len(kontext) == 1 and kontext[0]["stopped"], released
    calls = lines(tmp_path / "calls.jsonl")
    dev_calls = [c["end"] for c in calls if c["component"] == "image/dev"]
    assert len(dev_calls) == LIMIT
    # released between the jobs: before the second job's image calls, not at the sweep's end
    assert kontext[0]["time"] < min(dev_calls), (kontext, sorted(dev_calls))
    # the models the second job needed stayed until it ended (the last job: then all go)
    for entry in released:
        if entry["component"] != "image/kontext":
            assert entry["time"] > max(c["end"] for c in calls), entry
    loads = Counter((e["component"], e["devices"]) for e in lines(tmp_path / "loads.jsonl"))
    assert loads == Counter({(c, "0"): 1 for c in ("image/kontext", "image/dev", "tts/parler")})
    assert _stats(tmp_path)["loads_by_device"] == {
        c: {"0": 1} for c in ("image/dev", "image/kontext", "tts/parler")
    }
