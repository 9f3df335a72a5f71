"""planner.launch=true: start `vllm serve`, wait for /health, stop it (unload and at exit).

`vllm` is replaced by a stand-in executable (omnistory_testkit.servers's `serve` command):
it parses the same command line, becomes healthy after a configurable delay and serves the
OpenAI-compatible routes on 127.0.0.1.  Real vLLM is not installed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from omnistory_testkit import demo_planner_items, run_cli
from omnistory_vllm.planner import Qwen35Planner

from omnistory_core.api import ComponentError, PlannerResponse, parse_plan


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """A `vllm` executable that runs the stand-in server; returns its path and file paths."""
    exe = tmp_path / "bin" / "vllm"
    exe.parent.mkdir()
    exe.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "from omnistory_testkit.servers import main\nsys.exit(main())\n"
    )
    exe.chmod(0o755)
    files = {
        "exe": exe,
        "record": tmp_path / "requests.jsonl",
        "pid": tmp_path / "server.pid",
        "log": tmp_path / "vllm.log",
    }
    monkeypatch.setenv("OMNISTORY_FAKE_VLLM_RECORD", str(files["record"]))
    monkeypatch.setenv("OMNISTORY_FAKE_VLLM_PIDFILE", str(files["pid"]))
    return files


def _planner(files, **params):
    return Qwen35Planner(
        launch=True,
        launch_executable=str(files["exe"]),
        launch_log=str(files["log"]),
        base_url=None,
        **params,
    )


def test_launch_waits_for_health_serves_and_stops(fake_vllm, monkeypatch):
    monkeypatch.setenv("OMNISTORY_FAKE_VLLM_STARTUP_S", "1")  # /health refuses at first
    planner = _planner(fake_vllm, launch_args=["--max-model-len", "8192"])
    results = planner.run_batch(demo_planner_items(limit=2))
    assert all(isinstance(r, PlannerResponse) and parse_plan(r.text).ok for r in results)
    server = planner.server
    assert server is not None and server.running
    pid = int(fake_vllm["pid"].read_text())
    assert pid == server.process.pid

    log = fake_vllm["log"].read_text()
    argv = json.loads(log.split("fake vllm: argv ", 1)[1].splitlines()[0])
    assert argv == [
        "serve",
        "Qwen/Qwen3.5-4B",
        "--host",
        "127.0.0.1",
        "--port",
        str(server.port),
        "--max-model-len",
        "8192",
    ]
    recorded = [json.loads(line) for line in fake_vllm["record"].read_text().splitlines()]
    assert any(r["path"] == "/health" for r in recorded)
    chats = [r for r in recorded if r["path"] == "/v1/chat/completions"]
    assert len(chats) == 2
    assert all(c["body"]["chat_template_kwargs"] == {"enable_thinking": False} for c in chats)

    planner.unload()
    assert planner.server is None and not _alive(pid)


def test_failed_start_fails_fast_and_names_the_log(fake_vllm, monkeypatch):
    monkeypatch.setenv("OMNISTORY_FAKE_VLLM_FAIL", "CUDA out of memory (stand-in)")
    planner = _planner(fake_vllm)
    items = demo_planner_items(limit=1)
    with pytest.raises(ComponentError, match="exited with status 3") as first:
        planner.run_batch(items)
    assert "CUDA out of memory (stand-in)" in str(first.value)
    assert str(fake_vllm["log"]) in str(first.value)
    with pytest.raises(ComponentError, match="did not start"):
        planner.run_batch(items)  # remembered: no second launch
    assert fake_vllm["log"].read_text().count("CUDA out of memory (stand-in)") == 1


def test_health_timeout_stops_the_server(fake_vllm, monkeypatch):
    monkeypatch.setenv("OMNISTORY_FAKE_VLLM_STARTUP_S", "60")
    planner = _planner(fake_vllm, launch_timeout_s=1)
    with pytest.raises(ComponentError, match="was not healthy"):
        planner.run_batch(demo_planner_items(limit=1))
    assert not _alive(int(fake_vllm["pid"].read_text()))


def test_server_is_stopped_when_the_process_exits(fake_vllm, tmp_path):
    script = textwrap.dedent(f"""
        from omnistory_vllm.planner import Qwen35Planner
        planner = Qwen35Planner(launch=True, launch_executable={str(fake_vllm["exe"])!r},
                                launch_log={str(fake_vllm["log"])!r}, base_url=None)
        planner.load()
        print(planner.server.process.pid, flush=True)
        # exits without unload(): the atexit hook must stop the server
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert proc.returncode == 0, proc.stderr
    pid = int(proc.stdout.strip())
    assert pid == int(fake_vllm["pid"].read_text())
    assert not _alive(pid)


def test_cli_run_with_launch(fake_vllm, tmp_path: Path):
    out = tmp_path / "out"
    proc = run_cli(
        "planner=qwen35",
        "planner.launch=true",
        f"planner.launch_executable={fake_vllm['exe']}",
        f"planner.launch_log={fake_vllm['log']}",
        "dataset.limit=2",
        f"output_root={out}",
        "engine.progress=false",
        cwd=str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = out / "runs" / "demo" / "qwen35-copy-espeak"
    manifest = json.loads((job / "manifest.json").read_text())
    assert manifest["missing"] == {"text": 0, "image": 0, "speech": 0}
    assert "launch" not in manifest["components"]["planner"]["params"]  # runtime only
    assert not _alive(int(fake_vllm["pid"].read_text()))


def test_preflight_refuses_a_missing_vllm_executable(fake_vllm, tmp_path):
    _planner(fake_vllm).preflight()  # the stand-in exists
    missing = Qwen35Planner(launch=True, launch_executable=str(tmp_path / "no-vllm"), base_url=None)
    with pytest.raises(ComponentError, match="vLLM executable .*no-vllm.* is not found"):
        missing.preflight()
    Qwen35Planner(base_url="http://127.0.0.1:9/v1").preflight()  # no launch: nothing to check
