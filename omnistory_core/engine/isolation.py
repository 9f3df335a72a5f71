"""Run a component in its own virtual environment through a worker process.

Configure per component: ``tts.runner.python=/path/to/venv/bin/python`` (``runner.env`` adds
environment variables, ``runner.timeout_s`` bounds one batch).  The worker keeps the model loaded
across calls; a worker that dies makes the items of its batch ``model_error`` failures and is
restarted on the next call.  ``python -m omnistory_core env create tts=parler`` builds such an
environment.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from omnistory_core.components import Component, ComponentError, current_examples
from omnistory_core.engine.stage import Encoded
from omnistory_core.engine.worker import PARENT_ENV, encode_value

_spawner: concurrent.futures.ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def spawn(args: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    """``subprocess.Popen`` from one thread that lives as long as this process.

    A worker asks the kernel to kill it when its parent goes (``PR_SET_PDEATHSIG``), and Linux
    counts the *thread* that forked it as the parent: a worker started from a short-lived thread
    (a replica's) would be killed when that thread ends, so every worker is forked here."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spawner")
        spawner = _spawner
    return spawner.submit(subprocess.Popen, args, **kwargs).result()


class WorkerDied(ComponentError):
    def __init__(self, message: str):
        super().__init__(message, category="model_error")


class IsolatedComponent:
    """Looks like the wrapped component to the engine; executes it in a worker process.

    The worker protocol (one JSON request per line, one reply per line: ``load``, ``run``,
    ``shutdown``) is written here once: the load request and its version check, a ``run``
    request of a batch and its reply, a bounded wait for a reply.  How the lines travel is the
    transport's (:meth:`_running`, :meth:`_send`, :meth:`_receive`, :meth:`_kill`,
    :meth:`_died`): here a child process's stdin/stdout; a warm pool's server
    (:class:`omnistory_core.engine.pool.PooledComponent`) a socket."""

    #: what the transport's messages call the other end
    PEER = "worker"

    def __init__(
        self,
        component: Component,
        python: str,
        store_root: str | Path,
        env: dict[str, str] | None = None,
        timeout_s: float | None = None,
    ):
        self._component = component
        self.python = python
        self.store_root = str(store_root)
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        self.timeout_s = timeout_s
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: deque[str] = deque(maxlen=40)
        self.starts = 0

    def __getattr__(self, name: str) -> Any:  # identity, reads, params, key(), batch_size ...
        return getattr(self._component, name)

    @property
    def worker_pid(self) -> int | None:
        return self._proc.pid if self._proc and self._proc.poll() is None else None

    # -- the protocol (every transport) ----------------------------------------------------
    def preflight(self) -> None:
        """The interpreter exists.  The component's own check is not run here: its packages live
        in the other environment, so a problem there shows when the worker loads it."""
        if not Path(self.python).exists():
            raise ComponentError(
                f"{self._component.key()}: runner.python {self.python!r} does not exist; create it"
                f" with `python -m omnistory_core env create {self._component.kind}="
                f"{self._component.name}`"
            )

    def _load_request(self) -> dict[str, Any]:
        """The request that makes the worker load the component (or find it loaded)."""
        return {
            "op": "load",
            "kind": self._component.kind,
            "name": self._component.name,
            "params": self._component.params,
            "store": self.store_root,
        }

    def _check_version(self, reply: dict[str, Any]) -> None:
        """A worker whose environment has another version of the component would make other
        outputs under the same keys: refused, disconnected."""
        if reply.get("version") != self._component.version:
            self.unload()
            raise ComponentError(
                f"{self._component.key()}: the worker environment has version"
                f" {reply.get('version')!r}, this environment {self._component.version!r};"
                " reinstall the plugin in both"
            )

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        """One request and its reply; a worker that does not answer within ``timeout_s`` is
        killed (its batch fails as :class:`WorkerDied`)."""
        if not self._running():
            raise WorkerDied(f"{self.PEER} is not running")
        try:
            self._send(json.dumps(message, ensure_ascii=False) + "\n")
        except (BrokenPipeError, ConnectionResetError) as exc:
            # its end of the pipe is closed: the peer is gone, as when a reply never comes (which
            # of the two a killed peer shows depends on when it died)
            raise self._died(f"{self.PEER} exited (writing to it: {exc})") from None
        except OSError as exc:
            raise self._died(f"could not write to {self.PEER}: {exc}") from None
        timer = None
        if self.timeout_s:
            timer = threading.Timer(float(self.timeout_s), self._kill())
            timer.start()
        try:
            line = self._receive()
        finally:
            if timer:
                timer.cancel()
        if not line:
            raise self._died(f"{self.PEER} exited")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise ComponentError(f"worker error: {reply.get('error')}")
        return dict(reply)

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        if not self._running():
            self._start()  # restart after a crash
        payload = [{k: encode_value(v) for k, v in item.items()} for item in items]
        request: dict[str, Any] = {"op": "run", "items": payload}
        examples = current_examples()
        if len(examples) == len(items):  # the worker tells its component, as the engine does
            request["examples"] = list(examples)
        try:
            reply = self._request(request)
        except WorkerDied as exc:
            return [exc] * len(items)
        return [
            Encoded(r["status"], r["output"], r["failure"], r["usage"]) for r in reply["results"]
        ]

    # -- the transport: a child process's stdin and stdout ------------------------------------
    def _running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _send(self, line: str) -> None:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        proc.stdin.write(line)
        proc.stdin.flush()

    def _receive(self) -> str:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        return proc.stdout.readline()

    def _kill(self) -> Callable[[], None]:
        """What ends a worker that does not answer (bound now: it may be replaced meanwhile)."""
        proc = self._proc
        assert proc is not None
        return proc.kill

    def _start(self) -> None:
        self.preflight()
        self._proc = None
        env = {
            **os.environ,
            **self.env,
            "PYTHONUNBUFFERED": "1",
            PARENT_ENV: str(os.getpid()),
        }
        self._proc = spawn(
            [self.python, "-m", "omnistory_core.engine.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env=env,
            bufsize=1,
        )
        self.starts += 1
        proc = self._proc
        threading.Thread(target=self._drain, args=(proc,), daemon=True).start()
        self._check_version(self._request(self._load_request()))

    def _drain(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self._stderr.append(line.rstrip())

    def _died(self, what: str) -> WorkerDied:
        proc = self._proc
        code = proc.wait(timeout=10) if proc else None
        self._proc = None
        tail = " | ".join(list(self._stderr)[-5:])
        return WorkerDied(f"{self._component.key()} {what} (exit code {code}); stderr: {tail}")

    # -- component API ----------------------------------------------------------------------
    def load(self) -> None:
        if not self._running():
            self._start()

    def unload(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.write(json.dumps({"op": "shutdown"}) + "\n")
                proc.stdin.flush()
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()


def runner_env_var(kind: str, name: str) -> str:
    """``OMNISTORY_RUNNER_TTS_PARLER``: the interpreter for ``tts=parler`` when its config sets
    none, so a sweep over experts that each need their own environment needs no per-job override."""
    clean = "".join(c if c.isalnum() else "_" for c in f"{kind}_{name}").upper()
    return f"OMNISTORY_RUNNER_{clean}"


def maybe_isolate(component: Component, runner: Any, store_root: str | Path) -> Component:
    """Wrap ``component`` in a worker when ``runner.python`` (or its environment variable) is
    set: the :class:`IsolatedComponent` stands in for it (same attributes, calls in the worker)."""
    runner = dict(runner or {})
    python = runner.get("python") or os.environ.get(runner_env_var(component.kind, component.name))
    if not python:
        return component
    isolated = IsolatedComponent(
        component,
        str(python),
        store_root,
        env=dict(runner.get("env") or {}),
        timeout_s=runner.get("timeout_s"),
    )
    return cast(Component, isolated)
