"""The isolation worker: runs one component in another Python environment.

Started by :class:`omnistory_core.engine.isolation.IsolatedComponent` as
``<venv>/bin/python -m omnistory_core.engine.worker``; speaks JSON lines over stdio.  Requests::

    {"op": "load", "kind": "tts", "name": "parler", "params": {...}, "store": "/abs/store"}
    {"op": "run", "items": [{"utterance": "...",
                             "current_image": {"__media__": {"path", "sha256"}}}],
     "examples": ["<example id of each item>"]}
    {"op": "unload"} | {"op": "shutdown"}

Replies are one JSON object per request: ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``.
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


def serve(stdin, stdout) -> int:
    from omnistory_core.components import calling_examples
    from omnistory_core.engine.stage import encode_result, exception_failure
    from omnistory_core.engine.store import Store
    from omnistory_core.plugins import load_plugins

    component = None
    store = None

    def reply(obj: dict[str, Any]) -> None:
        stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        stdout.flush()

    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "load":
                registry = load_plugins()
                cls = registry.component(request["kind"], request["name"])
                component = cls(**request.get("params", {}))
                store = Store(request["store"])
                bind = getattr(component, "bind_store", None)
                if callable(bind):
                    bind(store.root)
                component.load()
                reply(
                    {
                        "ok": True,
                        "version": cls.version,
                        "pid": os.getpid(),
                        "python": sys.executable,
                    }
                )
            elif op == "run":
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
                    results.append(
                        {"status": status, "output": output, "failure": failure, "usage": usage}
                    )
                reply({"ok": True, "results": results})
            elif op == "unload":
                if component is not None:
                    component.unload()
                reply({"ok": True})
            elif op == "shutdown":
                reply({"ok": True})
                return 0
            else:
                raise ValueError(f"unknown op {op!r}")
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
