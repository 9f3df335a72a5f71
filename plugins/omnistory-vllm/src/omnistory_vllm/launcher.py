"""Start ``vllm serve <model>`` for a planner, wait until it is healthy, stop it afterwards.

The server runs in its own process group (``start_new_session``) so that stopping it also stops
the engine processes vLLM forks; it is stopped by :meth:`VLLMServer.stop` (the planner's
``unload``, i.e. right after the planner stage, freeing the GPU for the experts) and, as a
safety net, at interpreter exit.  Its output goes to a log file whose tail is quoted when the
server dies or never becomes healthy.
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
from dataclasses import dataclass, field
from pathlib import Path


class LaunchError(RuntimeError):
    """The server exited, or did not become healthy in time."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "model"


@dataclass
class VLLMServer:
    """One ``vllm serve`` process.  ``executable`` may be a path or an argv prefix."""

    model: str
    executable: str | Sequence[str] = "vllm"
    host: str = "127.0.0.1"
    port: int | None = None
    args: Sequence[str] = ()
    timeout_s: float = 1800.0
    log_path: str | None = None
    poll_interval_s: float = 0.5
    stop_grace_s: float = 30.0
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.port is None:
            self.port = free_port(self.host if self.host not in ("0.0.0.0", "::") else "127.0.0.1")
        if self.log_path is None:
            self.log_path = str(
                Path(tempfile.gettempdir()) / f"omnistory-vllm-{_slug(self.model)}-{self.port}.log"
            )

    # -- addresses ---------------------------------------------------------------------------
    @property
    def client_host(self) -> str:
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL of the server."""
        return f"http://{self.client_host}:{self.port}/v1"

    @property
    def health_url(self) -> str:
        return f"http://{self.client_host}:{self.port}/health"

    def command(self) -> list[str]:
        prefix = [self.executable] if isinstance(self.executable, str) else list(self.executable)
        return [
            *prefix,
            "serve",
            self.model,
            "--host",
            self.host,
            "--port",
            str(self.port),
            *[str(a) for a in self.args],
        ]

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the process and wait for ``GET /health`` to answer 200."""
        if self.running:
            return
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps writing to it
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
        finally:
            log.close()
        atexit.register(self.stop)
        self._wait_healthy()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            code = self.process.poll() if self.process is not None else None
            if code is not None:
                raise LaunchError(
                    f"`{' '.join(self.command())}` exited with status {code} before becoming "
                    f"healthy; last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if self._healthy():
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise LaunchError(
                    f"`{' '.join(self.command())}` was not healthy at {self.health_url} after "
                    f"{self.timeout_s:g} s (planner.launch_timeout_s); stopped it. Last lines "
                    f"of {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(self.poll_interval_s)

    def _healthy(self) -> bool:
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
                process.wait(timeout=self.stop_grace_s)
            except subprocess.TimeoutExpired:
                self._signal_group(process, signal.SIGKILL)
                process.wait(timeout=self.stop_grace_s)

    @staticmethod
    def _signal_group(process: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(process.pid, sig)  # our own child's group: start_new_session made it
        except ProcessLookupError:
            pass

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = Path(self.log_path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"
