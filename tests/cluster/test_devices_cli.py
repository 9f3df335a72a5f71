"""engine.devices through the real CLI: a sweep on several devices (processes standing in for
GPUs) runs one job per device and every GPU stage on replicas pinned to free devices; its outputs
are byte-identical to a single-device run, no call is made twice, a killed replica or a killed
job loses nothing, and a tensor-parallel model gets several devices per replica."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from devices_testing import alive, children, cmdline, job_outputs, lines, standin_env
from omnistory_testing import run_cli

LIMIT = 4
GRID = ("-m", "planner=claude", "image=kontext,dev", "tts=parler,voxcpm")
JOBS = ("claude-kontext-parler", "claude-kontext-voxcpm", "claude-dev-parler", "claude-dev-voxcpm")
#: distinct calls of the grid: 4 plans, 4 per image expert (they read the plan's image prompt),
#: 4 per TTS expert (the plan's speech fields, the same whatever the image expert)
DISTINCT = 5 * LIMIT
COMMON = (
    f"dataset.limit={LIMIT}",
    "output_root=out",
    "engine.progress=false",
    "evaluation.report=false",
)


def _env(root: Path, delay: float) -> dict[str, str]:
    return standin_env(root, delay)


def _outputs(root: Path) -> dict[str, str]:
    """sha256 of every generated file of every job, by path below the sweep directory."""
    return job_outputs(root / "out/sweeps/demo", JOBS)


def _calls(root: Path) -> list[dict]:
    return lines(root / "calls.jsonl")


def _records(root: Path) -> int:
    return len(list((root / "out/store/calls").rglob("*.json")))


def _summed_calls(root: Path) -> int:
    stats = json.loads((root / "out/sweeps/demo/sweep_stats.json").read_text())
    return sum(c["calls"] for c in stats["components"].values())


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, str]:
    """The grid on one device: one job after another, every model in the job's process."""
    root = tmp_path_factory.mktemp("one-device")
    proc = run_cli(*GRID, *COMMON, "engine.devices=[0]", cwd=root, env=_env(root, 0.0))
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = _calls(root)
    assert len(calls) == DISTINCT and {c["devices"] for c in calls} == {"0"}
    outputs = _outputs(root)
    assert len(outputs) == 3 * LIMIT * len(JOBS)
    return outputs


def test_four_devices_run_replicas_and_give_the_single_device_outputs(
    tmp_path: Path, reference: dict[str, str]
) -> None:
    proc = run_cli(
        *GRID, *COMMON, "engine.devices=[0,1,2,3]", cwd=tmp_path, env=_env(tmp_path, 0.3)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Launching 4 jobs, 4 at a time, on device(s) 0,1,2,3" in proc.stdout + proc.stderr
    assert _outputs(tmp_path) == reference, "outputs differ from the single-device run"
    calls = _calls(tmp_path)
    digests = Counter(c["digest"] for c in calls)
    assert len(digests) == DISTINCT and max(digests.values()) == 1, "a call was made twice"
    assert _records(tmp_path) == DISTINCT == _summed_calls(tmp_path)
    by_component: dict[str, set[str]] = {}
    for call in calls:
        by_component.setdefault(call["component"], set()).add(call["devices"])
    # the hosted planner runs in the job's process, which sees no GPU; every GPU call ran on a
    # replica pinned to exactly one of the four devices
    assert by_component.pop("planner/claude") == {""}
    for component, devices in by_component.items():
        assert devices <= {"0", "1", "2", "3"}, (component, devices)
    # the jobs' GPU stages ran side by side on several devices.  (Whether one expert's calls
    # spread over several devices is the scheduler's choice with the warm pool, which keeps each
    # model on the device it is loaded on; under a loaded CPU it often starts no second replica,
    # so that is not asserted here: tests/engine/test_pool.py checks loads per device.)
    assert len(set().union(*by_component.values())) >= 2, by_component


def _wait_for(what: str, condition, sweep: subprocess.Popen, timeout: float = 60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert sweep.poll() is None, f"the sweep ended before {what}"
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow(seconds=30)
def test_a_killed_replica_and_a_killed_job_lose_and_duplicate_nothing(
    tmp_path: Path, reference: dict[str, str]
) -> None:
    sweep = subprocess.Popen(
        # the replicas each job's stage starts (the sweep's warm pool, whose servers outlive
        # jobs, has its own kill -9 tests: tests/engine/test_pool.py)
        [
            sys.executable,
            "-m",
            "omnistory_core",
            *GRID,
            *COMMON,
            "engine.devices=[0,1,2]",
            "engine.warm_pool=false",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **_env(tmp_path, 0.5)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    killed: set[int] = set()
    try:

        def jobs() -> list[int]:
            return [p for p in children(sweep.pid) if "omnistory_launcher" in cmdline(p)]

        def replicas() -> list[tuple[int, int]]:
            return [
                (job, r)
                for job in jobs()
                for r in children(job)
                if "omnistory_core.engine.worker" in cmdline(r)
            ]

        # 1. a replica computing calls: SIGKILL; its job runs the chunk again on a restart
        _job, replica = _wait_for("a replica", lambda: (replicas() or [None])[0], sweep)
        _wait_for(
            "a replica's first call", lambda: any(c["devices"] for c in _calls(tmp_path)), sweep
        )
        os.kill(replica, signal.SIGKILL)
        killed.add(replica)

        # 2. a job's process with its replicas: SIGKILL; they die with it, the launcher restarts it
        def busy_job():
            for job, r in replicas():
                if r not in killed:
                    return job
            return None

        job = _wait_for("a job with a replica", busy_job, sweep)
        orphans = [r for r in children(job) if "omnistory_core.engine.worker" in cmdline(r)]
        os.kill(job, signal.SIGKILL)
        killed.update([job, *orphans])
        deadline = time.time() + 5
        while any(alive(p) for p in orphans) and time.time() < deadline:
            time.sleep(0.05)
        assert not any(alive(p) for p in orphans), "a replica outlived its job's process"
        err, _ = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait()
    assert sweep.returncode == 0, err[-4000:]
    assert "died (killed by SIGKILL); starting it again (1 of 1)" in err, err[-4000:]
    assert "died" in err and "running its" in err, "the killed replica's chunk was not re-run"
    assert _outputs(tmp_path) == reference, "outputs differ from the single-device run"
    assert _records(tmp_path) == DISTINCT
    calls = _calls(tmp_path)
    assert len({c["digest"] for c in calls}) == DISTINCT
    live = Counter(c["digest"] for c in calls if c["pid"] not in killed)
    assert max(live.values()) == 1, "a live process made a call twice"

    rerun = run_cli(*GRID, *COMMON, "engine.devices=[0,1,2]", cwd=tmp_path, env=_env(tmp_path, 0))
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert _summed_calls(tmp_path) == 0 and _records(tmp_path) == DISTINCT


def _fake_vllm(root: Path) -> Path:
    """A `vllm` executable that notes the devices it was given, then serves like vLLM."""
    exe = root / "bin" / "vllm"
    exe.parent.mkdir(parents=True)
    exe.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        f"open({str(root / 'vllm-devices.txt')!r}, 'a').write("
        "os.environ.get('CUDA_VISIBLE_DEVICES', '') + '\\n')\n"
        "from omnistory_testkit.servers import main\nsys.exit(main())\n"
    )
    exe.chmod(0o755)
    return exe


def test_a_tensor_parallel_planner_gets_its_devices(tmp_path: Path) -> None:
    exe = _fake_vllm(tmp_path)
    launch = (
        "planner=glm",
        "planner.launch=true",
        f"planner.launch_executable={exe}",
        "planner.launch_args=[--tensor-parallel-size,2]",
        "dataset.limit=2",
        "output_root=out",
        "engine.progress=false",
    )
    env = {"OMNISTORY_DEVICE_LOCKS": str(tmp_path / "device-locks")}
    proc = run_cli(*launch, "engine.devices=[0,1,2]", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "vllm-devices.txt").read_text().split() in (["0,1"], ["0,2"], ["1,2"])
    assert "planner/glm: replica 1 on device(s)" in proc.stdout + proc.stderr

    narrow = run_cli(*launch, "engine.devices=[0]", cwd=tmp_path, env=env)
    assert narrow.returncode == 2
    assert "planner=glm needs 2 GPUs at once but engine.devices has 1 (0)" in narrow.stderr
