"""backbone.launch=true: start `vllm serve <model> --omni`, wait for /health, stop it at unload.

`vllm` is a stand-in executable written by the test (it runs qwen25omni_fake_server's ``serve``):
it parses the same command line, refuses to start without ``--omni``, becomes healthy after a
configurable delay and serves the chat-completions protocol with audio.  Real vLLM-Omni is not
installed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from omnistory_qwen25omni.backbone import Qwen25OmniBackbone
from omnistory_testkit import run_cli
from qwen25omni_fake_server import NARRATION

from omnistory_core.api import ComponentError

TESTS = Path(__file__).parent


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "vllm"
    exe.parent.mkdir()
    exe.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(TESTS)!r})\n"
        "from qwen25omni_fake_server import serve_main\nsys.exit(serve_main(sys.argv[1:]))\n"
    )
    exe.chmod(0o755)
    files = {
        "exe": exe,
        "record": tmp_path / "requests.jsonl",
        "pid": tmp_path / "server.pid",
        "log": tmp_path / "vllm.log",
    }
    monkeypatch.setenv("FAKE_OMNI_RECORD", str(files["record"]))
    monkeypatch.setenv("FAKE_OMNI_PIDFILE", str(files["pid"]))
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return files


def _backbone(files, **params):
    return Qwen25OmniBackbone(
        backend="vllm_omni",
        launch=True,
        base_url=None,
        launch_log=str(files["log"]),
        seed=0,
        **params,
    )


def test_launch_serves_with_omni_and_stops_at_unload(fake_vllm, monkeypatch, demo_items):
    monkeypatch.setenv("FAKE_OMNI_STARTUP_S", "1")  # /health refuses at first
    backbone = _backbone(fake_vllm, launch_args=["--stage-configs-path", "stages.yaml"])
    out = backbone.run_batch(demo_items[:1])[0]
    assert out.failures == {} and out.text == NARRATION
    server = backbone.runner.server
    assert server is not None and server.running
    pid = int(fake_vllm["pid"].read_text())
    assert pid == server.process.pid
    argv = json.loads(
        fake_vllm["log"].read_text().split("fake vllm-omni: argv ", 1)[1].splitlines()[0]
    )
    assert argv == [
        "serve",
        "Qwen/Qwen2.5-Omni-7B",
        "--omni",
        "--host",
        "127.0.0.1",
        "--port",
        str(server.port),
        "--stage-configs-path",
        "stages.yaml",
    ]
    recorded = [json.loads(line) for line in fake_vllm["record"].read_text().splitlines()]
    assert any(r["path"] == "/health" for r in recorded)
    chats = [r["body"] for r in recorded if r["path"] == "/v1/chat/completions"]
    assert [c["modalities"] for c in chats] == [["text", "audio"], ["text"]]
    backbone.unload()
    assert backbone.runner is None and not _alive(pid)


def test_failed_start_is_reported_once_with_the_log(fake_vllm, monkeypatch, demo_items):
    monkeypatch.setenv("FAKE_OMNI_FAIL", "CUDA out of memory (stand-in)")
    backbone = _backbone(fake_vllm)
    with pytest.raises(ComponentError, match="exited with status 3") as info:
        backbone.load()
    message = str(info.value)
    assert "CUDA out of memory (stand-in)" in message and str(fake_vllm["log"]) in message
    results = backbone.run_batch(demo_items[:2])  # remembered: no second launch
    assert [str(r) for r in results] == [message, message]
    assert fake_vllm["log"].read_text().count("CUDA out of memory (stand-in)") == 1


def test_health_timeout_stops_the_server(fake_vllm, monkeypatch):
    monkeypatch.setenv("FAKE_OMNI_STARTUP_S", "60")
    backbone = _backbone(fake_vllm, launch_timeout_s=1)
    with pytest.raises(ComponentError, match="did not answer .*/health within 1 s"):
        backbone.load()
    assert not _alive(int(fake_vllm["pid"].read_text()))


def test_server_is_stopped_when_the_process_exits(fake_vllm):
    script = textwrap.dedent(f"""
        from omnistory_qwen25omni.backbone import Qwen25OmniBackbone
        b = Qwen25OmniBackbone(backend="vllm_omni", launch=True, base_url=None, seed=0,
                               launch_executable={str(fake_vllm["exe"])!r})
        b.load()
        print(b.runner.server.process.pid, flush=True)
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
    assert not _alive(pid)


def test_cli_with_launch(fake_vllm, tmp_path):
    out = tmp_path / "out"
    proc = run_cli(
        "backbone=qwen25omni",
        "backbone.backend=vllm_omni",
        "backbone.launch=true",
        f"backbone.launch_log={fake_vllm['log']}",
        "image=copy",
        "dataset.limit=2",
        f"output_root={out}",
        "engine.progress=false",
        cwd=str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = out / "runs" / "demo" / "qwen25omni-copy"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["missing"] == {"text": 0, "image": 0, "speech": 0}
    assert "launch" not in manifest["components"]["backbone"]["params"]
    assert not _alive(int(fake_vllm["pid"].read_text()))
