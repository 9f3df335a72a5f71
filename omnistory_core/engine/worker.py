"""The isolation worker: runs one component in another Python environment.

Started by :class:`omnistory_core.engine.isolation.IsolatedComponent` as
``<venv>/bin/python -m omnistory_core.engine.worker``; speaks JSON lines over stdio.  Requests::

    {"op": "load", "kind": "tts", "name": "parler", "params": {...}, "store": "/abs/store"}
    {"op": "run", "items": [{"utterance": "...",
                             "current_image": {"__media__": {"path", "sha256"}}}],
     "examples": ["<example id of each item>"]}
    {"op": "unload"} | {"op": "shutdown"}

Replies are one JSON object per request: ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``;
the reply to ``load`` says ``"fresh": false`` when the same component was loaded already (a server
of the sweep's warm pool, :mod:`omnistory_core.engine.pool`, keeps it across clients).
Results are encoded into the shared store by the worker (media travel as store paths, never through
the pipe): ``{"status", "output", "failure", "usage"}`` per item.  The model stays loaded across
calls.
Anything the component prints goes to stderr, so stdout carries protocol lines only.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

#: the pid of the process a worker must not outlive (:func:`die_with_parent`)
PARENT_ENV = "OMNISTORY_WORKER_PARENT"


def decode_value(value: Any) -> Any:
    """An input as the worker's component reads it: every encoded Media back, at any depth."""
    from omnistory_core.components import Media

    if isinstance(value, dict):
        if set(value) == {"__media__"}:
            return Media(**value["__media__"])
        return {k: decode_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    return value


def encode_value(value: Any) -> Any:
    """An input as JSON for the worker: Media (also inside lists and mappings) by path and hash."""
    from omnistory_core.components import Media

    if isinstance(value, Media):
        return {"__media__": {"path": value.path, "sha256": value.sha256}}
    if isinstance(value, dict):
        return {k: encode_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode_value(v) for v in value]
    return value


class Serving:
    """What a worker holds between requests: the loaded component and the store.  Shared by the
    stdio worker (:func:`serve`) and the sweep's warm-pool server
    (:mod:`omnistory_core.engine.pool`), which keeps one instance loaded across connections."""

    def __init__(self) -> None:
        self.component: Any = None
        self.store: Any = None
        #: the load request the component was loaded with (a pool server compares the next one)
        self.loaded_with: dict[str, Any] | None = None

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request (``shutdown`` is the caller's to act on)."""
        op = request.get("op")
        if op == "load":
            return self.load(request)
        if op == "run":
            return self.run(request)
        if op == "unload":
            if self.component is not None:
                self.component.unload()
            return {"ok": True}
        if op == "shutdown":
            return {"ok": True}
        raise ValueError(f"unknown op {op!r}")

    def load(self, request: dict[str, Any]) -> dict[str, Any]:
        from omnistory_core.engine.store import Store
        from omnistory_core.plugins import load_plugins

        spec = {k: request.get(k) for k in ("kind", "name", "params", "store")}
        fresh = self.component is None or self.loaded_with != spec
        if fresh:
            if self.component is not None:  # another component: the old one goes first
                self.component.unload()
                self.component = None
            registry = load_plugins()
            cls = registry.component(request["kind"], request["name"])
            component = cls(**request.get("params", {}))
            store = Store(request["store"])
            bind = getattr(component, "bind_store", None)
            if callable(bind):
                bind(store.root)
            component.load()
            self.component, self.store, self.loaded_with = component, store, spec
        return {
            "ok": True,
            "version": getattr(type(self.component), "version", None),
            "pid": os.getpid(),
            "python": sys.executable,
            "fresh": fresh,
        }

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        from omnistory_core.components import calling_examples
        from omnistory_core.engine.stage import encode_result, exception_failure

        component, store = self.component, self.store
        if component is None or store is None:
            raise RuntimeError("run before load")
        items = [{k: decode_value(v) for k, v in it.items()} for it in request["items"]]
        # the engine's example ids, so the component logs them as it would there
        examples = [str(e) for e in request.get("examples") or []]
        try:
            with calling_examples(examples if len(examples) == len(items) else ()):
                outputs = component.run_batch(items)
        except Exception as exc:  # the whole batch failed: report per item
            outputs = [exc] * len(items)
        results = []
        for out in outputs:
            try:
                status, output, failure, usage = encode_result(
                    component.kind,
                    out,
                    store,
                    getattr(component, "produces", None),
                    type(component),
                )
            except Exception as exc:
                status, output, failure, usage = (
                    "failure",
                    {},
                    exception_failure(exc, type(component)).to_dict(),
                    {},
                )
            results.append({"status": status, "output": output, "failure": failure, "usage": usage})
        return {"ok": True, "results": results}


def serve(stdin, stdout) -> int:
    state = Serving()

    def reply(obj: dict[str, Any]) -> None:
        stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        stdout.flush()

    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            reply(state.handle(request))
            if request.get("op") == "shutdown":
                return 0
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            reply({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    return 0


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when the process that started it dies, so a worker
    never goes on computing calls whose store locks died with its parent (no-op elsewhere)."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl
        return
    if str(os.getppid()) != parent:  # the parent died before the request took effect
        os._exit(1)


def main() -> int:
    die_with_parent()
    # Keep the protocol channel clean: everything printed by libraries goes to stderr.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return serve(sys.stdin, protocol)


if __name__ == "__main__":
    sys.exit(main())
