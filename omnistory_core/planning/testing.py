"""A local stand-in for the planner APIs, for tests and offline demos (standard library only).

:class:`RecordingServer` listens on 127.0.0.1 and speaks the real wire formats that the SDKs
use: OpenAI Chat Completions (``POST /v1/chat/completions``, also what vLLM serves), Anthropic
Messages (``POST /v1/messages``), and vLLM's ``GET /health`` and ``GET /v1/models``.  It records
every request (path, headers, JSON body) and answers from per-route scripts of :class:`Reply`
objects, falling back to a valid plan.  It is not a model: it only lets the real SDK clients,
retries, timeouts and accounting of the planners be exercised without a network.

``python -m omnistory_core.planning.testing serve MODEL --host H --port P [ignored vllm flags]``
behaves like ``vllm serve`` as far as a launcher can tell (it becomes healthy, serves the
OpenAI-compatible routes for MODEL, stops on SIGTERM); environment variables
``OMNISTORY_FAKE_VLLM_STARTUP_S`` (delay before listening), ``OMNISTORY_FAKE_VLLM_RECORD``
(append requests as JSON lines), ``OMNISTORY_FAKE_VLLM_PIDFILE`` and ``OMNISTORY_FAKE_VLLM_FAIL``
(print it to stderr and exit 3) steer it in launcher tests.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: a plan that parse_plan accepts
VALID_PLAN: dict[str, Any] = {
    "narration": "Pip tapped the glass. \"The moon fell behind the hill!\" he said.",
    "image_prompt": "A small orange fox taps on a bedroom window at night, flat shapes, "
                    "night colours",
    "speech": {
        "utterance": "The moon fell behind the hill!",
        "speaker": "Pip",
        "emotion": "neutral",
        "speed": "fast",
        "pitch": "high",
        "gender": "male",
    },
}

ROUTES = {"/v1/chat/completions": "chat", "/v1/messages": "messages"}


@dataclass
class Reply:
    """One scripted answer.

    ``status`` 200 answers with ``text`` as the assistant message (the default plan if None) in
    the route's format; other statuses answer with the route's error body.  ``raw_body``
    replaces the whole body.  ``delay_s`` waits before answering (a timeout test).
    """

    status: int = 200
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw_body: str | None = None
    message: str = "scripted error"

    @classmethod
    def rate_limited(cls, retry_after: str = "1") -> Reply:
        return cls(status=429, headers={"Retry-After": retry_after}, message="rate limited")

    @classmethod
    def slow(cls, delay_s: float) -> Reply:
        return cls(delay_s=delay_s)


@dataclass
class RecordedRequest:
    """One request as received (header names lower-cased, JSON body decoded)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def route(self) -> str | None:
        return ROUTES.get(self.path)


class RecordingServer:
    """Threaded HTTP server on 127.0.0.1 (port 0 = any free port); see the module docstring.

    ``served_model`` makes the chat route answer 404 for other model names, as vLLM does.
    ``hold_until_concurrent=n`` holds each request until n are in flight (or ``hold_timeout_s``
    passes) and then ``hold_settle_s`` more, so a client's concurrency shows in
    ``peak_in_flight`` without timing assumptions about the client.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        usage: tuple[int, int] = (1000, 50),
        served_model: str | None = None,
        hold_until_concurrent: int | None = None,
        hold_timeout_s: float = 5.0,
        hold_settle_s: float = 0.05,
        record_path: str | None = None,
    ) -> None:
        self.usage = usage
        self.served_model = served_model
        self.hold_until_concurrent = hold_until_concurrent
        self.hold_timeout_s = hold_timeout_s
        self.hold_settle_s = hold_settle_s
        self._generation = 0
        self.record_path = record_path
        self.requests: list[RecordedRequest] = []
        self.peak_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Condition()
        self._scripts: dict[str, deque[Reply]] = {"chat": deque(), "messages": deque()}
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- control -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def script(self, route: str, *replies: Reply) -> None:
        """Queue replies for ``route`` (``"chat"`` or ``"messages"``), answered in order."""
        with self._lock:
            self._scripts[route].extend(replies)

    def requests_for(self, route: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.route == route]

    def start(self) -> RecordingServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        name=f"recording-server-{self.port}")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> RecordingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    # -- request handling --------------------------------------------------------------------
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
        if self.record_path:
            with open(self.record_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(request.__dict__) + "\n")

    def _next_reply(self, route: str) -> Reply:
        with self._lock:
            queue = self._scripts[route]
            return queue.popleft() if queue else Reply()

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
            if not self.hold_until_concurrent:
                return
            if self._in_flight >= self.hold_until_concurrent:
                # a new generation releases every waiter, even one that wakes up after some
                # of the requests that made the count have already left
                self._generation += 1
                self._lock.notify_all()
            else:
                generation = self._generation
                deadline = time.monotonic() + self.hold_timeout_s
                while (self._generation == generation and not self._stop.is_set()
                       and time.monotonic() < deadline):
                    self._lock.wait(timeout=max(0.0, deadline - time.monotonic()))
        # answering a moment later lets any request beyond the bound pile up and show in the peak
        self._stop.wait(self.hold_settle_s)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def answer(self, route: str, body: Any) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for one POST to ``route``."""
        reply = self._next_reply(route)
        if reply.delay_s:
            self._stop.wait(reply.delay_s)
        if reply.raw_body is not None:
            return reply.status, reply.headers, reply.raw_body.encode("utf-8")
        model = body.get("model") if isinstance(body, dict) else None
        if route == "chat" and self.served_model and model != self.served_model:
            return 404, {}, _dumps({"object": "error", "type": "NotFoundError", "code": 404,
                                    "message": f"The model `{model}` does not exist."})
        if reply.status != 200:
            return reply.status, reply.headers, _error_body(route, reply.status, reply.message)
        text = reply.text if reply.text is not None else json.dumps(VALID_PLAN)
        if route == "chat":
            payload = _chat_completion(model or "model", text, self.usage)
        else:
            payload = _anthropic_message(model or "model", text, self.usage, body)
        return 200, reply.headers, _dumps(payload)


def _dumps(payload: Any) -> bytes:
    return json.dumps(payload).encode("utf-8")


def _error_body(route: str, status: int, message: str) -> bytes:
    if route == "messages":
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        return _dumps({"type": "error", "error": {"type": kind, "message": message}})
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    return _dumps({"error": {"message": message, "type": kind, "code": kind, "param": None}})


def _chat_completion(model: str, text: str, usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                  "total_tokens": usage[0] + usage[1]},
    }


def _anthropic_message(model: str, text: str, usage: tuple[int, int], body: Any
                       ) -> dict[str, Any]:
    choice = body.get("tool_choice") if isinstance(body, dict) else None
    if isinstance(choice, dict) and choice.get("type") == "tool":
        try:
            tool_input = json.loads(text)
        except ValueError:
            tool_input = {"unparseable": text}
        content = [{"type": "tool_use", "id": "toolu_local", "name": choice.get("name"),
                    "input": tool_input}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": text}]
        stop = "end_turn"
    return {
        "id": "msg_local", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def _headers(message: Any) -> dict[str, str]:
    """Header names lower-cased (HTTP header names are case-insensitive)."""
    return {str(k).lower(): str(v) for k, v in message.items()}


def _handler_for(server: RecordingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
            pass

        def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            server._record(RecordedRequest("GET", self.path, _headers(self.headers), None))
            if self.path == "/health":
                self._send(200, {}, b"")
            elif self.path == "/v1/models":
                name = server.served_model or "model"
                self._send(200, {}, _dumps({"object": "list", "data": [
                    {"id": name, "object": "model", "owned_by": "vllm"}]}))
            else:
                self._send(404, {}, _dumps({"error": {"message": "not found"}}))

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = raw.decode("utf-8", "replace")
            server._record(RecordedRequest("POST", self.path, _headers(self.headers), body))
            route = ROUTES.get(self.path)
            if route is None:
                self._send(404, {}, _dumps({"error": {"message": f"no route {self.path}"}}))
                return
            server._enter()
            try:
                status, headers, payload = server.answer(route, body)
            finally:
                server._leave()
            self._send(status, headers, payload)

    return Handler


# -- helpers for planner tests -----------------------------------------------------------------


def demo_planner_items(limit: int = 2) -> list[dict[str, Any]]:
    """Planner inputs for the first ``limit`` demo examples, built as the engine builds them."""
    from omnistory_core.components import EXAMPLE_INPUTS
    from omnistory_core.data.demo import load_demo
    from omnistory_core.engine.job import MediaHasher, example_inputs

    media = MediaHasher()
    return [
        {k: example_inputs(ex, media, oracle=False)[k] for k in EXAMPLE_INPUTS}
        for ex in load_demo(limit=limit)
    ]


def run_omnistory_cli(*args: str, cwd: str, env: dict[str, str] | None = None,
                      timeout: float = 300) -> Any:
    """Run ``python -m omnistory_core ARGS`` as a user would; returns the CompletedProcess."""
    import subprocess

    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "omnistory_core", *args], cwd=cwd,
                          env=full_env, capture_output=True, text=True, timeout=timeout)


def files_containing(root: str, needle: str) -> list[str]:
    """Every file under ``root`` whose bytes contain ``needle`` (a secret-leak check)."""
    hits = []
    data = needle.encode("utf-8")
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as fh:
                    if data in fh.read():
                        hits.append(path)
            except OSError:
                continue
    return hits


# -- `vllm serve` stand-in ----------------------------------------------------------------------


def fake_vllm_main(argv: list[str]) -> int:
    """``serve MODEL [--host H] [--port P] [other flags ignored]``; see the module docstring."""
    if not argv or argv[0] != "serve" or len(argv) < 2:
        print("usage: serve MODEL [--host H] [--port P] ...", file=sys.stderr)
        return 2
    model, rest = argv[1], argv[2:]
    host, port = "127.0.0.1", 8000
    for i, arg in enumerate(rest[:-1]):
        if arg == "--host":
            host = rest[i + 1]
        elif arg == "--port":
            port = int(rest[i + 1])
    failure = os.environ.get("OMNISTORY_FAKE_VLLM_FAIL")
    if failure:
        print(failure, file=sys.stderr, flush=True)
        return 3
    pidfile = os.environ.get("OMNISTORY_FAKE_VLLM_PIDFILE")
    if pidfile:
        with open(pidfile, "w", encoding="utf-8") as fh:
            fh.write(str(os.getpid()))
    print(f"fake vllm: argv {json.dumps(argv)}", flush=True)
    print(f"fake vllm: loading {model}", flush=True)
    time.sleep(float(os.environ.get("OMNISTORY_FAKE_VLLM_STARTUP_S", "0") or 0))
    server = RecordingServer(host=host, port=port, served_model=model,
                             record_path=os.environ.get("OMNISTORY_FAKE_VLLM_RECORD") or None)

    def terminate(signum: int, frame: Any) -> None:
        threading.Thread(target=server.stop, daemon=True).start()

    signal.signal(signal.SIGTERM, terminate)
    print(f"fake vllm: serving {model} on http://{host}:{server.port}", flush=True)
    server.serve_forever()
    return 0


__all__ = [
    "ROUTES",
    "VALID_PLAN",
    "RecordedRequest",
    "RecordingServer",
    "Reply",
    "demo_planner_items",
    "fake_vllm_main",
    "files_containing",
    "run_omnistory_cli",
]


def main(argv: list[str] | None = None) -> int:
    return fake_vllm_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())

