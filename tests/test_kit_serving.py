"""omnistory_core.kit.serving: a ``serve``-style server run as a real subprocess.

The server is a small stand-in script (written here, run with this interpreter): it parses the
``serve`` command line, forks a worker into its process group as vLLM forks its engine, answers
``/health`` with 503 until a delay has passed and 200 afterwards, and can be told to exit at once
or to ignore SIGTERM.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from omnistory_core.kit.serving import LaunchError, ServerProcess, free_port, log_slug

STANDIN = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    argv = sys.argv[1:]
    assert argv[0] == "serve", argv
    host, port = argv[argv.index("--host") + 1], int(argv[argv.index("--port") + 1])
    print("argv " + json.dumps(argv), flush=True)
    if os.environ.get("STANDIN_FAIL"):
        print(os.environ["STANDIN_FAIL"], flush=True)
        sys.exit(3)
    if os.environ.get("STANDIN_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["STANDIN_PIDS"], "w") as out:
        json.dump([os.getpid(), worker.pid], out)
    ready_at = time.monotonic() + float(os.environ.get("STANDIN_STARTUP_S", "0"))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            code = 200 if time.monotonic() >= ready_at else 503
            self.send_response(code if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    ThreadingHTTPServer((host, port), Handler).serve_forever()
    """
)


class StandIn(ServerProcess):
    serve_flags = ("--omni",)
    log_prefix = "omnistory-test"
    timeout_setting = "test.launch_timeout_s"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is gone for our purpose
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    script = tmp_path / "standin.py"
    script.write_text(STANDIN)
    pids = tmp_path / "pids.json"
    monkeypatch.setenv("STANDIN_PIDS", str(pids))
    files = {"script": script, "pids": pids, "log": tmp_path / "server.log", "servers": []}
    yield files
    for server in files["servers"]:  # a failed assertion must not leave a server behind
        server.stop()


def _server(files, **kwargs) -> StandIn:
    server = StandIn(
        "org/Model v1",
        executable=[sys.executable, str(files["script"])],
        log_path=str(files["log"]),
        poll_s=0.05,
        grace_s=5.0,
        **kwargs,
    )
    files["servers"].append(server)
    return server


def test_start_waits_for_health_and_stop_ends_the_whole_group(standin, monkeypatch) -> None:
    monkeypatch.setenv("STANDIN_STARTUP_S", "0.5")
    server = _server(standin, args=["--max-model-len", 8192])
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    started = time.monotonic()
    server.start()
    assert time.monotonic() - started >= 0.5
    assert server.running and server.process is not None
    parent, worker = json.loads(standin["pids"].read_text())
    assert parent == server.process.pid
    logged = standin["log"].read_text().split("argv ", 1)[1].splitlines()[0]
    assert json.loads(logged) == [
        "serve",
        "org/Model v1",
        "--omni",
        "--host",
        "127.0.0.1",
        "--port",
        str(server.port),
        "--max-model-len",
        "8192",
    ]
    server.start()  # running already: no second process
    assert json.loads(standin["pids"].read_text())[0] == parent

    server.stop()
    assert server.process is None and not server.running
    assert _gone(parent) and _gone(worker)  # the forked worker went with its group
    server.stop()  # stopping twice is harmless


def test_a_server_that_exits_is_reported_with_its_log(standin, monkeypatch) -> None:
    monkeypatch.setenv("STANDIN_FAIL", "CUDA out of memory (stand-in)")
    server = _server(standin)
    with pytest.raises(LaunchError) as info:
        server.start()
    message = str(info.value)
    assert message.startswith(f"`{' '.join(server.command())}` exited with status 3 before")
    assert str(standin["log"]) in message and "CUDA out of memory (stand-in)" in message
    assert server.process is None and not server.running


def test_a_server_never_healthy_is_stopped_at_the_timeout(standin, monkeypatch) -> None:
    monkeypatch.setenv("STANDIN_STARTUP_S", "600")
    server = _server(standin, timeout_s=0.5)
    with pytest.raises(LaunchError, match=r"after 0\.5 s \(test\.launch_timeout_s\); stopped it"):
        server.start()
    parent, worker = json.loads(standin["pids"].read_text())
    assert server.process is None and _gone(parent) and _gone(worker)


def test_sigkill_follows_an_ignored_sigterm_after_the_grace_time(standin, monkeypatch) -> None:
    monkeypatch.setenv("STANDIN_IGNORE_TERM", "1")
    server = _server(standin)
    server.grace_s = 0.5
    server.start()
    parent, _ = json.loads(standin["pids"].read_text())
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started >= 0.5
    assert _gone(parent)


def test_a_missing_executable_is_a_launch_error(tmp_path: Path) -> None:
    server = StandIn("m", executable=str(tmp_path / "no-vllm"), log_path=str(tmp_path / "x.log"))
    with pytest.raises(LaunchError, match="cannot start .*no-vllm"):
        server.start()
    assert server.process is None


def test_defaults_name_a_free_port_and_a_log_file() -> None:
    server = StandIn("org/Model v1", host="0.0.0.0")
    assert server.client_host == "127.0.0.1" and 0 < server.port < 65536
    assert server.command()[:4] == ["vllm", "serve", "org/Model v1", "--omni"]
    assert Path(server.log_path).name == f"omnistory-test-org_Model_v1-{server.port}.log"
    assert log_slug("///") == "model"
    assert isinstance(free_port(), int)
