"""``backbone.launch=true``: start a vLLM-Omni server, wait until it answers, stop it afterwards.

The command is ``<launch_executable> serve <model> --omni --host H --port P <launch_args...>``
(vLLM-Omni plugs into the ``vllm`` command; ``--omni`` selects its multi-stage engine, which runs
Dynin-Omni as the three stages token2text, token2image and token2audio).  The server runs in a
process group of its own so stopping it also stops the engine processes it forks; it is stopped by
the backbone's ``unload`` and, as a safety net, at interpreter exit.  Its output goes to a log file
whose last lines are quoted when it dies or never becomes healthy.
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
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


class LaunchError(RuntimeError):
    """The server exited, or did not answer ``GET /health`` in time."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class OmniServer:
    """One ``vllm serve <model> --omni`` process."""

    def __init__(
        self,
        model: str,
        *,
        executable: str | list[str] = "vllm",
        host: str = "127.0.0.1",
        port: int | None = None,
        args: list[str] | None = None,
        timeout_s: float = 1800.0,
        log_path: str | None = None,
        poll_s: float = 0.5,
        grace_s: float = 30.0,
    ) -> None:
        self.model = model
        self.executable = [executable] if isinstance(executable, str) else list(executable)
        self.host = host
        self.client_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        self.port = port or free_port(self.client_host)
        self.args = [str(a) for a in (args or [])]
        self.timeout_s = timeout_s
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_") or "model"
        self.log_path = log_path or str(
            Path(tempfile.gettempdir()) / f"omnistory-dynin-{slug}-{self.port}.log"
        )
        self.poll_s = poll_s
        self.grace_s = grace_s
        self.process: subprocess.Popen[Any] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.client_host}:{self.port}/v1"

    @property
    def health_url(self) -> str:
        return f"http://{self.client_host}:{self.port}/health"

    def command(self) -> list[str]:
        return [
            *self.executable,
            "serve",
            self.model,
            "--omni",
            "--host",
            self.host,
            "--port",
            str(self.port),
            *self.args,
        ]

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        if self.running:
            return
        with open(self.log_path, "ab") as log:
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
        deadline = time.monotonic() + self.timeout_s
        while not self._healthy():
            code = self.process.poll() if self.process is not None else None
            if code is not None:
                raise LaunchError(
                    f"`{' '.join(self.command())}` exited with status {code} before it became "
                    f"healthy; last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if time.monotonic() >= deadline:
                self.stop()
                raise LaunchError(
                    f"`{' '.join(self.command())}` was not healthy at {self.health_url} after "
                    f"{self.timeout_s:g} s (backbone.launch_timeout_s); stopped it. Last lines of "
                    f"{self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(self.poll_s)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.health_url, timeout=5) as response:  # noqa: S310
                return response.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after the grace time."""
        process, self.process = self.process, None
        if process is None:
            return
        atexit.unregister(self.stop)
        if process.poll() is None:
            self._signal(process, signal.SIGTERM)
            try:
                process.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                self._signal(process, signal.SIGKILL)
                process.wait(timeout=self.grace_s)

    @staticmethod
    def _signal(process: subprocess.Popen[Any], sig: int) -> None:
        try:
            os.killpg(process.pid, sig)  # the group start_new_session gave our own child
        except ProcessLookupError:
            pass

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = Path(self.log_path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"
