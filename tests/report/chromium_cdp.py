"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (stdlib only).

Chromium reads NUL-terminated JSON commands from fd 3 and writes responses/events to fd 4, so no
websocket library or Selenium is needed.  Used by the HTML report test to load pages, evaluate
JavaScript in them and take screenshots.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """Headless Chromium driven over the DevTools pipe; use as a context manager."""

    def __init__(self, user_data_dir: Path, binary: str | None = None, timeout: float = 30.0):
        self.binary = binary or chromium_binary()
        if self.binary is None:
            raise FileNotFoundError("no chromium binary on PATH")
        self.user_data_dir = user_data_dir
        self.timeout = timeout
        self._next_id = 0
        self._responses: dict[int, dict[str, Any]] = {}
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._cond = threading.Condition()
        self.session_id: str | None = None

    def __enter__(self) -> Chromium:
        to_child_r, self._to_child_w = os.pipe()
        self._from_child_r, from_child_w = os.pipe()
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--no-default-browser-check",
            "--mute-audio",
            "--window-size=1400,1000",
            f"--user-data-dir={self.user_data_dir}",
            "--remote-debugging-pipe",
        ]
        self.user_data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.user_data_dir.parent / f"{self.user_data_dir.name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in __exit__

        def pipe_fds() -> None:
            # The DevTools pipe must be fds 3 (commands in) and 4 (messages out) of the browser.
            # Move both ends above 9 first so that neither dup2 clobbers the other.
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w)]
            for target, fd in zip((3, 4), high, strict=True):
                os.dup2(fd, target)  # dup2 leaves the copy inheritable
                os.close(fd)

        # close_fds=False keeps the inheritable fds 3 and 4; every other fd Python opened is
        # close-on-exec already.
        self._proc = subprocess.Popen(
            [self.binary, *flags],
            preexec_fn=pipe_fds,  # noqa: PLW1509 - no threads are running yet
            close_fds=False,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        params = {"targetId": target["targetId"], "flatten": True}
        attached = self.send("Target.attachToTarget", params, session=False)
        self.session_id = attached["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Exception:  # noqa: BLE001 - the browser may already be gone
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_child_w)
        self._log.close()

    def log_tail(self, n: int = 2000) -> str:
        """The end of Chromium's own output, for failure messages."""
        return self.log_path.read_bytes()[-n:].decode("utf-8", "replace")

    def _read_loop(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_child_r, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._responses[msg["id"]] = msg
                        self._cond.notify_all()
                else:
                    self._events.put(msg)
        os.close(self._from_child_r)

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: bool = True,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session_id
        try:
            os.write(self._to_child_w, json.dumps(msg).encode() + b"\0")
        except BrokenPipeError as exc:
            raise RuntimeError(f"chromium exited; its output:\n{self.log_tail()}") from exc
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while self._next_id not in self._responses:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no DevTools response to {method}")
                self._cond.wait(left)
            reply = self._responses.pop(self._next_id)
        if "error" in reply:
            raise RuntimeError(f"{method} failed: {reply['error']}")
        return reply.get("result", {})

    def navigate(self, url: str) -> None:
        """Open ``url`` and wait for its load event."""
        while not self._events.empty():
            self._events.get_nowait()
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"page did not load: {url}")
            event = self._events.get(timeout=left)
            if event.get("method") == "Page.loadEventFired":
                return

    def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript (promises awaited) and return its JSON value."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path
