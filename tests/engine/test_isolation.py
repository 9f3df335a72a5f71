"""A component running in a second virtual environment created by `omnistory env create`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from omnistory_testing import run_cli

from omnistory_core.engine.isolation import IsolatedComponent
from omnistory_core.engine.job import build_component
from omnistory_core.engine.stage import ComponentStats, LazyComponent, StageItem, run_stage
from omnistory_core.engine.store import Store
from omnistory_core.plugins import load_plugins


@pytest.fixture(scope="module")
def second_venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("isolated")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "env",
            "create",
            "planner=instruction",
            "--dir",
            str(root / "venv"),
            "--no-compile",  # the worker imports a few modules: bytecode for 2,000 is wasted
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "planner.runner.python=" in proc.stdout
    python = root / "venv/bin/python"
    prefix = subprocess.run(
        [str(python), "-c", "import sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(prefix).resolve() == (root / "venv").resolve()
    assert Path(prefix).resolve() != Path(sys.prefix).resolve()
    return python


def _noop(delay: float = 0.0):
    return build_component(
        load_plugins(), "planner", {"name": "noop", "delay_s": delay}, seed=0, allow_oracle=False
    )


def test_worker_answers_calls_in_the_other_environment(second_venv: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    worker = IsolatedComponent(_noop(), str(second_venv), store.root)
    stats = ComponentStats()
    lazy = LazyComponent(worker, stats)
    items = [StageItem(i, {"current_text": f"page {i}"}) for i in range(5)]
    out = run_stage(lazy, items, store)
    assert all(r.status == "ok" for r in out.values())
    assert json.loads(out[0].output["text"])["narration"] == "Nothing happens."
    pid = worker.worker_pid
    assert pid and pid != os.getpid()
    exe = Path(f"/proc/{pid}/exe").resolve()
    assert exe == second_venv.resolve() or str(exe).startswith(str(Path(sys.base_prefix)))
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    assert cmdline == str(second_venv)
    assert stats.calls == 5 and stats.loads == 1 and worker.starts == 1
    lazy.release()
    assert worker.worker_pid is None


def test_killed_worker_between_calls_is_restarted(second_venv: Path, tmp_path: Path) -> None:
    worker = IsolatedComponent(_noop(), str(second_venv), tmp_path / "store")
    worker.load()
    assert worker.run_batch([{"current_text": "a"}])[0].status == "ok"
    os.kill(worker.worker_pid, signal.SIGKILL)
    time.sleep(0.2)
    result = worker.run_batch([{"current_text": "b"}])[0]
    assert result.status == "ok" and worker.starts == 2
    worker.unload()


def test_worker_killed_mid_call_gives_model_error_then_recovers(
    second_venv: Path, tmp_path: Path
) -> None:
    store = Store(tmp_path / "store")
    worker = IsolatedComponent(_noop(delay=5.0), str(second_venv), store.root)
    worker.load()
    killer = threading.Timer(1.0, lambda: os.kill(worker.worker_pid, signal.SIGKILL))
    killer.start()
    stats = ComponentStats()
    out = run_stage(
        LazyComponent(worker, stats),
        [StageItem(0, {"current_text": "x"}), StageItem(1, {"current_text": "y"})],
        store,
    )
    killer.join()
    # the item whose call was running when the worker died is a model_error ...
    assert out[0].failure["category"] == "model_error"
    assert "exit code -9" in out[0].failure["message"]
    # ... and the next item ran in a restarted worker
    assert out[1].status == "ok" and worker.starts == 2
    worker._component.params["delay_s"] = 0.0  # runtime param: same cache key
    again = run_stage(
        LazyComponent(worker, ComponentStats()),
        [StageItem(0, {"current_text": "x"})],
        store,
        retry_failures=True,
    )
    assert again[0].status == "ok"
    worker.unload()


def test_cli_runs_a_plugin_planner_in_its_own_environment(second_venv: Path, tmp_path: Path):
    proc = run_cli(
        "planner=instruction",
        f"planner.runner.python={second_venv}",
        "dataset.limit=2",
        "output_root=out",
        "engine.progress=false",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(
        (tmp_path / "out/runs/demo/instruction-copy-espeak/manifest.json").read_text()
    )
    assert manifest["components"]["planner"]["runner_python"] == str(second_venv)
    assert (tmp_path / "out/runs/demo/instruction-copy-espeak/text/1/generated.txt").exists()
