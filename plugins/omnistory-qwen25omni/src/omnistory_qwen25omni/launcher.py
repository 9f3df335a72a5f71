"""``backbone.launch=true``: start ``vllm serve <model> --omni``, wait for ``/health``, stop it.

The server runs in its own session (process group), so stopping it also stops the stage workers
vLLM-Omni forks; :meth:`OmniServer.stop` runs at the backbone's ``unload`` (right after the
backbone stage, which frees the GPU for the image expert) and, as a safety net, at interpreter
exit.  Its output goes to a log file whose tail is quoted when it dies or never becomes healthy.
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
from collections.abc import Sequence
from pathlib import Path


class LaunchError(RuntimeError):
    """The server exited, or did not answer ``/health`` in time."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class OmniServer:
    """One ``<executable> serve <model> --omni --host H --port P [args]`` process."""

    def __init__(
        self,
        model: str,
        *,
        executable: str | Sequence[str] = "vllm",
        host: str = "127.0.0.1",
        port: int | None = None,
        args: Sequence[str] = (),
        timeout_s: float = 1800.0,
        log_path: str | None = None,
        poll_s: float = 0.5,
        grace_s: float = 30.0,
    ) -> None:
        self.model = model
        self.executable = [executable] if isinstance(executable, str) else list(executable)
        self.host = host
        self.client_host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
        self.port = int(port) if port else free_port(self.client_host)
        self.args = [str(a) for a in args]
        self.timeout_s = float(timeout_s)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_") or "model"
        self.log_path = log_path or str(
            Path(tempfile.gettempdir()) / f"omnistory-vllm-omni-{slug}-{self.port}.log"
        )
        self.poll_s = poll_s
        self.grace_s = grace_s
        self.process: subprocess.Popen | None = None

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
                raise LaunchError(f"cannot start {self.executable[0]!r}: {exc}") from exc
        atexit.register(self.stop)
        deadline = time.monotonic() + self.timeout_s
        while not self._healthy():
            code = self.process.poll()
            if code is not None:
                self.process = None
                atexit.unregister(self.stop)
                raise LaunchError(
                    f"`{' '.join(self.command())}` exited with status {code} before answering "
                    f"/health; last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if time.monotonic() >= deadline:
                self.stop()
                raise LaunchError(
                    f"`{' '.join(self.command())}` did not answer {self.health_url} within "
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
            _signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait(timeout=self.grace_s)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = Path(self.log_path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the group our own child leads (start_new_session)
    except ProcessLookupError:
        pass
