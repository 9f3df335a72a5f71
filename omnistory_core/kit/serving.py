"""A model server run as a subprocess: ``<executable> serve <model> [flags] --host H --port P
[args...]`` started in a process group of its own, waited for until ``GET /health`` answers 200,
and stopped with its whole group.

vLLM and vLLM-Omni serve a model that way, and several plugins start such a server for a component
with ``launch=true`` (the vLLM planners; Dynin-Omni and Qwen2.5-Omni through vLLM-Omni).  What
they need is the same: a free port, a log file whose tail explains a failed start, a health poll
bounded by a timeout, and a stop that reaches the engine processes the server forks (hence the own
session: ``os.killpg`` on the server's group, SIGTERM then SIGKILL after a grace time), with the
stop registered at interpreter exit as a safety net.  :class:`ServerProcess` is that, once; a
plugin's launcher subclasses it to name its flags, its log file and its error wording.

Standard library only: launcher modules are imported when a plugin's component is built, long
before (and often without) any server being started.
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["LaunchError", "ServerProcess", "free_port", "log_slug"]

#: hosts a server listens on that a client cannot connect to as such
_ANY_HOST = ("0.0.0.0", "::", "")


class LaunchError(RuntimeError):
    """The server exited, or did not answer ``GET /health`` in time."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def log_slug(text: str) -> str:
    """``text`` (a model id) as a file-name fragment."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "model"


class ServerProcess:
    """One ``<executable> serve <model> [serve_flags] --host H --port P [args]`` process.

    ``executable`` is a program (name or path) or an argv prefix.  ``port=None`` picks a free one;
    ``log_path=None`` is ``<tmp>/<log_prefix>-<model>-<port>.log``.  The class attributes below are
    what a plugin's launcher sets; the messages are formatted with the fields ``command``,
    ``code``, ``health_url``, ``timeout_s``, ``timeout_setting``, ``log_path`` and ``log_tail``.
    """

    #: flags right after the model (``("--omni",)`` for vLLM-Omni's multi-stage engine)
    serve_flags: ClassVar[tuple[str, ...]] = ()
    #: the start of the default log file's name
    log_prefix: ClassVar[str] = "omnistory-server"
    #: the setting users change ``timeout_s`` with, named when the server is not healthy in time
    timeout_setting: ClassVar[str] = "launch_timeout_s"
    exited_message: ClassVar[str] = (
        "`{command}` exited with status {code} before becoming healthy; "
        "last lines of {log_path}:\n{log_tail}"
    )
    timeout_message: ClassVar[str] = (
        "`{command}` was not healthy at {health_url} after {timeout_s:g} s ({timeout_setting}); "
        "stopped it. Last lines of {log_path}:\n{log_tail}"
    )

    def __init__(
        self,
        model: str,
        *,
        executable: str | Sequence[str] = "vllm",
        host: str = "127.0.0.1",
        port: int | None = None,
        args: Sequence[Any] | None = (),
        timeout_s: float = 1800.0,
        log_path: str | None = None,
        poll_s: float = 0.5,
        grace_s: float = 30.0,
    ) -> None:
        self.model = model
        self.executable = [executable] if isinstance(executable, str) else list(executable)
        self.host = host
        self.port = int(port) if port else free_port(self.client_host)
        self.args = [str(a) for a in args or ()]
        self.timeout_s = float(timeout_s)
        self.log_path = log_path or self.default_log_path()
        self.poll_s = poll_s
        self.grace_s = grace_s
        self.process: subprocess.Popen[Any] | None = None

    # -- addresses -------------------------------------------------------------------------
    @property
    def client_host(self) -> str:
        """The host a client connects to (loopback when the server listens on every address)."""
        return "127.0.0.1" if self.host in _ANY_HOST else self.host

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL of the server."""
        return f"http://{self.client_host}:{self.port}/v1"

    @property
    def health_url(self) -> str:
        return f"http://{self.client_host}:{self.port}/health"

    def default_log_path(self) -> str:
        name = f"{self.log_prefix}-{log_slug(self.model)}-{self.port}.log"
        return str(Path(tempfile.gettempdir()) / name)

    def command(self) -> list[str]:
        exe = self.executable
        prefix = [exe] if isinstance(exe, str) else list(exe)
        return [
            *prefix,
            "serve",
            self.model,
            *self.serve_flags,
            "--host",
            self.host,
            "--port",
            str(self.port),
            *[str(a) for a in self.args],
        ]

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the process (unless it runs) and wait for ``GET /health`` to answer 200."""
        if self.running:
            return
        with open(self.log_path, "ab") as log:  # the child keeps writing to its own copy
            try:
                self.process = subprocess.Popen(
                    self.command(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as exc:
                raise LaunchError(f"cannot start {self.command()[0]!r}: {exc}") from exc
        atexit.register(self.stop)
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            # the exit status first: whatever answers on the port, a dead server is no server
            code = self.process.poll() if self.process is not None else None
            if code is not None:
                message = self._message(self.exited_message, code=code)
                self.stop()  # nothing left to signal; drops the process and the exit hook
                raise LaunchError(message)
            if self._healthy():
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise LaunchError(self._message(self.timeout_message))
            time.sleep(self.poll_s)

    def _message(self, template: str, **fields: Any) -> str:
        return template.format(
            command=" ".join(self.command()),
            health_url=self.health_url,
            timeout_s=self.timeout_s,
            timeout_setting=self.timeout_setting,
            log_path=self.log_path,
            log_tail=self.log_tail(),
            **fields,
        )

    def _healthy(self) -> bool:
        # here, not at the top: plugins import this module when they register, and urllib.request
        # (http.client, email, ssl) costs every CLI process some 30 ms of CPU
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(self.health_url, timeout=5) as response:  # noqa: S310
                return response.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def stop(self) -> None:
        """Stop the server and its process group (SIGTERM, then SIGKILL after the grace time)."""
        process, self.process = self.process, None
        if process is None:
            return
        atexit.unregister(self.stop)
        if process.poll() is None:
            self._signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                self._signal_group(process, signal.SIGKILL)
                process.wait(timeout=self.grace_s)

    @staticmethod
    def _signal_group(process: subprocess.Popen[Any], sig: int) -> None:
        try:
            os.killpg(process.pid, sig)  # our own child's group: start_new_session made it
        except ProcessLookupError:
            pass

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the server's log."""
        try:
            text = Path(self.log_path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"
