"""Several sweeps on one store with lease locking, through the real CLI: one worker is killed with
SIGKILL while it holds leases, the others reclaim them and finish; nothing is lost or computed
twice, and a re-run computes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from omnistory_testing import run_cli

from omnistory_core.data import load_demo

N = len(load_demo())
SWEEP = (
    "-m",
    "planner=noop",
    "image=noop,copy",
    "tts=noop",
    "planner.delay_s=0.4",
    "output_root=out",
    "engine.progress=false",
    "evaluation.report=false",
    "engine.store_locking=lease",
    "engine.store_lease_s=2",
)
JOBS = ("noop-noop-noop", "noop-copy-noop")


def _records(root: Path) -> int:
    calls = root / "out/store/calls"
    return len(list(calls.rglob("*.json"))) if calls.exists() else 0


def _calls(root: Path, sweep: str) -> int:
    stats = json.loads((root / f"out/sweeps/{sweep}/sweep_stats.json").read_text())
    return sum(c["calls"] for c in stats["components"].values())


def _assert_complete(root: Path, sweep: str) -> None:
    for job in JOBS:
        out = root / "out/sweeps" / sweep / job
        for i in range(N):
            assert (out / f"text/{i}/generated.txt").read_text().strip(), (job, i)
            assert (out / f"image/{i}/generated.png").read_bytes()[:4] == b"\x89PNG", (job, i)
            assert (out / f"speech/{i}/generated.wav").read_bytes()[:4] == b"RIFF", (job, i)
        assert (out / "missing.txt").read_text() == "", job


def _start(root: Path, sweep: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "omnistory_core", *SWEEP, f"sweep_name={sweep}"],
        cwd=root,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_a_worker_killed_mid_sweep_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    doomed = _start(tmp_path, "killed")
    try:
        deadline = time.time() + 60
        while _records(tmp_path) < 3:  # it holds the leases of every plan it has not made yet
            assert doomed.poll() is None, doomed.stderr.read().decode() if doomed.stderr else ""
            assert time.time() < deadline, "the first worker made no plan"
            time.sleep(0.05)
        survivors = [_start(tmp_path, name) for name in ("a", "b")]
    finally:
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait()
    # the survivors are still starting up and every remaining plan is leased by the dead worker,
    # so every record now is the dead worker's
    by_dead = _records(tmp_path)
    assert doomed.returncode == -signal.SIGKILL and 3 <= by_dead < N
    leases = list((tmp_path / "out/store/locks").glob("*/*.lease"))
    assert leases, "the killed worker left its leases behind"
    for proc in survivors:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-3000:]

    _assert_complete(tmp_path, "a")
    _assert_complete(tmp_path, "b")
    distinct = _records(tmp_path)
    # planner: N keys; noop image and tts: one key each (same output for every example); copy: N
    assert distinct == 2 * N + 2
    assert by_dead + _calls(tmp_path, "a") + _calls(tmp_path, "b") == distinct, (
        "a key was computed twice"
    )
    assert not list((tmp_path / "out/store/locks").glob("*/*.lease")), "a lease was not released"
    # the dead worker's liveness record went with its last lease, the others' when they exited
    assert not list((tmp_path / "out/store/locks/owners").glob("*.json"))

    rerun = run_cli(*SWEEP, "sweep_name=killed", cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    _assert_complete(tmp_path, "killed")
    assert _calls(tmp_path, "killed") == 0
    assert _records(tmp_path) == distinct
