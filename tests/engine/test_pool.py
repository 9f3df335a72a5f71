"""The sweep's warm pool (engine.warm_pool): a component is loaded at most once per device for
the whole sweep and serves every job's stages there, outputs byte-identical to a sweep without
it; a pool server killed mid-chunk loses nothing and computes nothing twice; the device memory
budget makes room by shutting idle models down.  Devices are processes standing in for GPUs
(an id is only a name), the models the testkit's stand-ins."""

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
from devices_testing import alive, children, job_outputs, lines, pool_servers, standin_env
from omnistory_testkit import run_cli
from omnistory_testkit.standins import standin_classes

from omnistory_core.engine.pool import (
    PooledComponent,
    loads_by_device,
    open_pool,
    shutdown_pool,
)
from omnistory_core.engine.store import Store

LIMIT = 3
GRID = ("-m", "planner=claude", "image=kontext,dev", "tts=parler,voxcpm")
JOBS = ("claude-kontext-parler", "claude-kontext-voxcpm", "claude-dev-parler", "claude-dev-voxcpm")
#: distinct calls: the plans, then per image and TTS expert one per example
DISTINCT = 5 * LIMIT
GPU_COMPONENTS = {"image/kontext", "image/dev", "tts/parler", "tts/voxcpm"}
COMMON = (
    f"dataset.limit={LIMIT}",
    "output_root=out",
    "engine.progress=false",
    "evaluation.report=false",
)


def _env(root: Path, delay: float, load_s: float = 0.2) -> dict[str, str]:
    return standin_env(root, delay, load_s=load_s)


def _outputs(root: Path) -> dict[str, str]:
    return job_outputs(root / "out/sweeps/demo", JOBS)


def _pairs(root: Path) -> Counter:
    """Model loads the stand-ins made, per (component, devices)."""
    return Counter((e["component"], e["devices"]) for e in lines(root / "loads.jsonl"))


def _stats(root: Path) -> dict:
    return json.loads((root / "out/sweeps/demo/sweep_stats.json").read_text())


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, str]:
    """The grid on one device without the pool: every job loads its own models."""
    root = tmp_path_factory.mktemp("no-pool")
    proc = run_cli(
        *GRID, *COMMON, "engine.devices=[0]", "engine.warm_pool=false", cwd=root, env=_env(root, 0)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # one job after another in one process: a later job finds an expert's calls in the store
    # (they depend on the plan only) and loads nothing for them
    assert _pairs(root) == Counter({(c, "0"): 1 for c in GPU_COMPONENTS})
    assert "loads_by_device" not in _stats(root)
    outputs = _outputs(root)
    assert len(outputs) == 3 * LIMIT * len(JOBS)
    return outputs


def test_one_device_sweep_loads_each_model_once_for_all_jobs(
    tmp_path: Path, reference: dict[str, str]
) -> None:
    proc = run_cli(*GRID, *COMMON, "engine.devices=[0]", cwd=tmp_path, env=_env(tmp_path, 0))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _outputs(tmp_path) == reference, "outputs differ from the sweep without the pool"
    pairs = _pairs(tmp_path)
    assert pairs == Counter({(c, "0"): 1 for c in GPU_COMPONENTS}), pairs
    stats = _stats(tmp_path)
    assert stats["loads_by_device"] == {c: {"0": 1} for c in sorted(GPU_COMPONENTS)}
    assert sum(stats["components"][c]["loads"] for c in GPU_COMPONENTS) == len(GPU_COMPONENTS)
    calls = Counter(c["digest"] for c in lines(tmp_path / "calls.jsonl"))
    assert len(calls) == DISTINCT and max(calls.values()) == 1
    # the servers went with the sweep: nothing of it still runs
    assert not (tmp_path / "out/sweeps/demo/.pool/pool.json").exists()


def test_several_devices_load_each_pair_once_and_give_the_same_outputs(
    tmp_path: Path, reference: dict[str, str]
) -> None:
    proc = run_cli(*GRID, *COMMON, "engine.devices=[0,1,2]", cwd=tmp_path, env=_env(tmp_path, 0.2))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _outputs(tmp_path) == reference, "outputs differ from the sweep without the pool"
    pairs = _pairs(tmp_path)
    assert pairs and max(pairs.values()) == 1, f"a model was loaded twice on a device: {pairs}"
    assert {c for c, _ in pairs} == GPU_COMPONENTS
    assert {d for _, d in pairs} <= {"0", "1", "2"}
    # what the sweep reports is what the models saw
    reported = {
        (c, d): n for c, per in _stats(tmp_path)["loads_by_device"].items() for d, n in per.items()
    }
    assert Counter(reported) == pairs
    calls = Counter(c["digest"] for c in lines(tmp_path / "calls.jsonl"))
    assert len(calls) == DISTINCT and max(calls.values()) == 1, "a call was made twice"


def test_a_killed_pool_server_loses_and_duplicates_nothing(
    tmp_path: Path, reference: dict[str, str]
) -> None:
    before = set(pool_servers())
    sweep = subprocess.Popen(
        [sys.executable, "-m", "omnistory_core", *GRID, *COMMON, "engine.devices=[0,1]"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **_env(tmp_path, 0.5)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    victim = None
    try:
        deadline = time.time() + 120
        while victim is None and time.time() < deadline:
            assert sweep.poll() is None, "the sweep ended before a pool server computed a call"
            gpu_calls = [c for c in lines(tmp_path / "calls.jsonl") if c["devices"]]
            servers = [p for p in pool_servers() if p not in before]
            # a server that has made one call and is (very likely) computing its next
            busy = {c["pid"] for c in gpu_calls} & set(servers)
            if busy:
                victim = sorted(busy)[0]
                os.kill(victim, signal.SIGKILL)
            time.sleep(0.05)
        assert victim is not None, "no pool server computed a call"
        out, _ = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait()
    assert sweep.returncode == 0, out[-4000:]
    assert _outputs(tmp_path) == reference, "outputs differ from the sweep without the pool"
    assert len(list((tmp_path / "out/store/calls").rglob("*.json"))) == DISTINCT
    calls = lines(tmp_path / "calls.jsonl")
    assert len({c["digest"] for c in calls}) == DISTINCT
    live = Counter(c["digest"] for c in calls if c["pid"] != victim)
    assert max(live.values()) == 1, "a live process made a call twice"
    # a rerun finds everything in the store: no call, no load
    rerun_env = _env(tmp_path, 0)
    (tmp_path / "loads.jsonl").unlink()
    rerun = run_cli(*GRID, *COMMON, "engine.devices=[0,1]", cwd=tmp_path, env=rerun_env)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert sum(c["calls"] for c in _stats(tmp_path)["components"].values()) == 0
    assert not _pairs(tmp_path)


# -- the pool directly: warm reuse, the memory budget, a dead server ------------------------------
def _standin(kind: str, name: str, footprint: float) -> object:
    cls = next(c for c in standin_classes(kind) if c.name == name)
    component = cls()
    component.footprint_gb = footprint  # what a real model declares
    return component


def _client(component: object, tmp_path: Path, pool: Path) -> PooledComponent:
    return PooledComponent(component, sys.executable, tmp_path / "store", pool, ["0"])  # type: ignore[arg-type]


def test_budget_shuts_idle_models_down_and_warm_ones_serve_again(
    tmp_path: Path, monkeypatch
) -> None:
    for key, value in _env(tmp_path, 0, load_s=0).items():
        monkeypatch.setenv(key, value)
    Store(tmp_path / "store")
    item = {"image_prompt": "a red fox"}
    pool = open_pool(tmp_path / "pool", budget_gb=10.0, idle_s=60)
    try:
        kontext = _client(_standin("image", "kontext", 6.0), tmp_path, pool)
        assert kontext.load() is True  # nothing warm: loads
        first = kontext.run_batch([item])
        kontext.unload()
        again = _client(_standin("image", "kontext", 6.0), tmp_path, pool)
        assert again.load() is False  # warm: no load
        assert again.run_batch([item]) == first
        again.unload()
        # 6 + 6 > 10 GB: kontext makes room for dev
        dev = _client(_standin("image", "dev", 6.0), tmp_path, pool)
        assert dev.load() is True
        dev.unload()
        assert _client(_standin("image", "kontext", 6.0), tmp_path, pool).load() is True
        assert loads_by_device(pool) == {"image/dev": {"0": 1}, "image/kontext": {"0": 2}}
        # within the budget both stay: 3 + 6 <= 10
        parler = _client(_standin("tts", "parler", 3.0), tmp_path, pool)
        assert parler.load() is True
        parler.unload()
        assert _client(_standin("image", "kontext", 6.0), tmp_path, pool).load() is False
    finally:
        shutdown_pool(pool)
    left = pool_servers(pool)
    assert left == [], [Path(f"/proc/{p}/status").read_text()[:200] for p in left]


def test_a_dead_server_fails_its_batch_and_the_next_one_starts_in_its_place(
    tmp_path: Path, monkeypatch
) -> None:
    for key, value in _env(tmp_path, 0, load_s=0).items():
        monkeypatch.setenv(key, value)
    Store(tmp_path / "store")
    pool = open_pool(tmp_path / "pool", idle_s=60)
    try:
        client = _client(_standin("image", "dev", 0.0), tmp_path, pool)
        assert client.load() is True
        pid = client.worker_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        outputs = client.run_batch([{"image_prompt": "a cat"}])
        assert outputs[0].category == "model_error" and "pool server exited" in str(outputs[0])
        ok = client.run_batch([{"image_prompt": "a cat"}])  # a new server, a new load
        assert ok[0].status == "ok" and client.worker_pid not in (None, pid)
        assert loads_by_device(pool) == {"image/dev": {"0": 2}}
    finally:
        shutdown_pool(pool)


def test_killed_jobs_stop_the_servers_computing_for_them(
    tmp_path: Path, reference: dict[str, str]
) -> None:
    """kill -9 of the jobs while pool servers compute their chunks: a server whose client hangs
    up exits at once (the chunk's locks died with the job), the restarted jobs compute those
    calls, and no live process makes a call twice."""
    delay = 1.0
    sweep = subprocess.Popen(
        [sys.executable, "-m", "omnistory_core", *GRID, *COMMON, "engine.devices=[0,1]"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **_env(tmp_path, delay)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    killed: set[int] = set()
    try:
        deadline = time.time() + 120
        computing: set[int] = set()
        while not computing and time.time() < deadline:
            assert sweep.poll() is None, "the sweep ended before a pool server computed a call"
            per_pid = Counter(c["pid"] for c in lines(tmp_path / "calls.jsonl") if c["devices"])
            # a server with its first call done has LIMIT - 1 still to compute
            computing = {p for p in pool_servers(tmp_path) if per_pid[p] == 1}
            time.sleep(0.05)
        assert computing, "no pool server computed a call"
        # a call's record is written before its reply: half a call later its server computes
        # the next chunk rather than waits for it
        time.sleep(delay / 2)
        servers = set(pool_servers(tmp_path))
        for job in children(sweep.pid):
            os.kill(job, signal.SIGKILL)
            killed.add(job)
        assert killed and not killed & servers, "the jobs, not the servers, are killed"
        stop = time.time() + 5
        while computing & {p for p in servers if alive(p)} and time.time() < stop:
            time.sleep(0.05)
        hung_up = {p for p in servers if not alive(p)}
        out, _ = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait()
    assert sweep.returncode == 0, out[-4000:]
    assert "starting it again (1 of 1)" in out, out[-4000:]
    assert computing & hung_up, "no server stopped when its job was killed"
    assert _outputs(tmp_path) == reference, "outputs differ from the sweep without the pool"
    assert len(list((tmp_path / "out/store/calls").rglob("*.json"))) == DISTINCT
    calls = lines(tmp_path / "calls.jsonl")
    assert len({c["digest"] for c in calls}) == DISTINCT
    live = Counter(c["digest"] for c in calls if c["pid"] not in killed | hung_up)
    assert max(live.values()) == 1, "a live process made a call twice"
