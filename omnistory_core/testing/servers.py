"""One local stand-in for the model APIs, for tests, benchmarks and offline demos (stdlib only).

:class:`FakeServer` listens on 127.0.0.1 and speaks the real wire formats the SDKs use: OpenAI Chat
Completions (``POST /v1/chat/completions``, also what vLLM serves), Anthropic Messages
(``POST /v1/messages``), and vLLM's ``GET /health`` and ``GET /v1/models``.  It records every
request (path, headers, JSON body) and answers, per request, the next scripted :class:`Reply` of
the route, else what ``responder(body)`` returns, else a valid plan.  It is not a model: it lets
the real SDK clients, retries, timeouts, concurrency limits and usage accounting of planners,
judges and API backbones run without a network::

    with FakeServer() as server:                       # answers a valid plan to every request
        planner = MyPlanner(base_url=server.openai_base_url)
        server.script("chat", Reply.rate_limited(), Reply(text='{"narration": ...}'))
    with FakeServer(lambda body: Reply(text=judge_json)) as server: ...

``python -m omnistory_core.testing.servers serve MODEL --host H --port P [ignored vllm flags]``
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
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: a plan that ``omnistory_core.plan_schema.parse_plan`` accepts
VALID_PLAN: dict[str, Any] = {
    "narration": 'Pip tapped the glass. "The moon fell behind the hill!" he said.',
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


def route_of(path: str) -> str | None:
    """``chat`` or ``messages`` for a POST path (any prefix before the API's own suffix)."""
    if path in ROUTES:
        return ROUTES[path]
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/messages"):
        return "messages"
    return None


@dataclass
class Reply:
    """One answer.

    ``status`` 200 answers with ``text`` as the assistant message (a valid plan if None) in the
    route's format; other statuses answer with the route's error body carrying ``message``.
    ``raw_body`` replaces the whole body.  ``delay_s`` holds the request open first (timeouts,
    concurrency).  ``content``, ``delay`` and ``error_message`` are accepted as other spellings of
    ``text``, ``delay_s`` and ``message``.
    """

    status: int = 200
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw_body: str | None = None
    message: str = "scripted error"
    finish_reason: str = "stop"
    content: InitVar[str | None] = None
    delay: InitVar[float | None] = None
    error_message: InitVar[str | None] = None

    def __post_init__(
        self, content: str | None, delay: float | None, error_message: str | None
    ) -> None:
        if content is not None:
            self.text = content
        if delay is not None:
            self.delay_s = delay
        if error_message is not None:
            self.message = error_message

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
        return route_of(self.path) if self.method == "POST" else None


class FakeServer:
    """Threaded HTTP server on 127.0.0.1 (port 0 = any free port); see the module docstring.

    * ``responder(body) -> Reply`` answers requests that no script covers;
    * ``usage=(prompt, completion)`` token counts in every answer; ``None`` counts the words of
      the answer as completion tokens;
    * ``served_model`` makes the chat route answer 404 for other model names, as vLLM does;
    * ``hold_until_concurrent=n`` holds each request until n are in flight (or ``hold_timeout_s``
      passes) and then ``hold_settle_s`` more, so a client's concurrency shows in
      ``peak_in_flight`` without timing assumptions about the client;
    * ``record_path`` appends every request as a JSON line (for servers in another process).
    """

    def __init__(
        self,
        responder: Callable[[Any], Reply] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        usage: tuple[int, int] | None = (1000, 50),
        served_model: str | None = None,
        hold_until_concurrent: int | None = None,
        hold_timeout_s: float = 5.0,
        hold_settle_s: float = 0.05,
        record_path: str | None = None,
    ) -> None:
        self.responder = responder
        self.usage = usage
        self.served_model = served_model
        self.hold_until_concurrent = hold_until_concurrent
        self.hold_timeout_s = hold_timeout_s
        self.hold_settle_s = hold_settle_s
        self.record_path = record_path
        self.recorded: list[RecordedRequest] = []
        self.peak_in_flight = 0
        self.in_flight = 0
        self._generation = 0
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
        """What an OpenAI or vLLM client takes as ``base_url``."""
        return f"{self.url}/v1"

    base_url = openai_base_url

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order."""
        return self.recorded

    def script(self, route: str, *replies: Reply) -> None:
        """Queue replies for ``route`` (``"chat"`` or ``"messages"``), answered in order."""
        with self._lock:
            self._scripts[route].extend(replies)

    def requests_for(self, route: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.recorded if r.route == route]

    def bodies(self, route: str = "chat") -> list[Any]:
        """The JSON bodies of the requests to ``route``, in order."""
        return [r.body for r in self.requests_for(route)]

    def start(self) -> FakeServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"fake-server-{self.port}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.05)

    # -- request handling --------------------------------------------------------------------
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.recorded.append(request)
        if self.record_path:
            with open(self.record_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(request.__dict__) + "\n")

    def _next_reply(self, route: str, body: Any) -> Reply:
        with self._lock:
            queue = self._scripts[route]
            if queue:
                return queue.popleft()
        return self.responder(body) if self.responder is not None else Reply()

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            if not self.hold_until_concurrent:
                return
            if self.in_flight >= self.hold_until_concurrent:
                # a new generation releases every waiter, even one that wakes up after some
                # of the requests that made the count have already left
                self._generation += 1
                self._lock.notify_all()
            else:
                generation = self._generation
                deadline = time.monotonic() + self.hold_timeout_s
                while (
                    self._generation == generation
                    and not self._stop.is_set()
                    and time.monotonic() < deadline
                ):
                    self._lock.wait(timeout=max(0.0, deadline - time.monotonic()))
        # answering a moment later lets any request beyond the bound pile up and show in the peak
        self._stop.wait(self.hold_settle_s)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def answer(self, route: str, body: Any) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for one POST to ``route``."""
        reply = self._next_reply(route, body)
        if reply.delay_s:
            self._stop.wait(reply.delay_s)
        if reply.raw_body is not None:
            return reply.status, reply.headers, reply.raw_body.encode("utf-8")
        model = body.get("model") if isinstance(body, dict) else None
        if route == "chat" and self.served_model and model != self.served_model:
            return (
                404,
                {},
                _dumps(
                    {
                        "object": "error",
                        "type": "NotFoundError",
                        "code": 404,
                        "message": f"The model `{model}` does not exist.",
                    }
                ),
            )
        if reply.status != 200:
            return reply.status, reply.headers, _error_body(route, reply.status, reply.message)
        text = reply.text if reply.text is not None else json.dumps(VALID_PLAN)
        usage = self.usage or (1, max(len(text.split()), 1))
        if route == "chat":
            payload = chat_completion(model or "model", text, usage, reply.finish_reason)
        else:
            payload = anthropic_message(model or "model", text, usage, body)
        return 200, reply.headers, _dumps(payload)


def _dumps(payload: Any) -> bytes:
    return json.dumps(payload).encode("utf-8")


def _error_body(route: str, status: int, message: str) -> bytes:
    if route == "messages":
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        return _dumps({"type": "error", "error": {"type": kind, "message": message}})
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    return _dumps({"error": {"message": message, "type": kind, "code": kind, "param": None}})


def chat_completion(
    model: str, text: str, usage: tuple[int, int] = (1, 1), finish_reason: str = "stop"
) -> dict[str, Any]:
    """An OpenAI Chat Completions response body."""
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "logprobs": None,
                "message": {"role": "assistant", "content": text},
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        },
    }


def anthropic_message(model: str, text: str, usage: tuple[int, int], body: Any) -> dict[str, Any]:
    """An Anthropic Messages response body (a ``tool_use`` block when a tool was forced)."""
    choice = body.get("tool_choice") if isinstance(body, dict) else None
    if isinstance(choice, dict) and choice.get("type") == "tool":
        try:
            tool_input = json.loads(text)
        except ValueError:
            tool_input = {"unparseable": text}
        content = [
            {
                "type": "tool_use",
                "id": "toolu_local",
                "name": choice.get("name"),
                "input": tool_input,
            }
        ]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": text}]
        stop = "end_turn"
    return {
        "id": "msg_local",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def _headers(message: Any) -> dict[str, str]:
    """Header names lower-cased (HTTP header names are case-insensitive)."""
    return {str(k).lower(): str(v) for k, v in message.items()}


def _handler_for(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # header and body go out as separate writes

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
                listing = {
                    "object": "list",
                    "data": [{"id": name, "object": "model", "owned_by": "vllm"}],
                }
                self._send(200, {}, _dumps(listing))
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
            route = route_of(self.path)
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
    server = FakeServer(
        host=host,
        port=port,
        served_model=model,
        record_path=os.environ.get("OMNISTORY_FAKE_VLLM_RECORD") or None,
    )

    def terminate(signum: int, frame: Any) -> None:
        threading.Thread(target=server.stop, daemon=True).start()

    signal.signal(signal.SIGTERM, terminate)
    print(f"fake vllm: serving {model} on http://{host}:{server.port}", flush=True)
    server.serve_forever()
    return 0


def main(argv: list[str] | None = None) -> int:
    return fake_vllm_main(sys.argv[1:] if argv is None else argv)


__all__ = [
    "ROUTES",
    "VALID_PLAN",
    "FakeServer",
    "RecordedRequest",
    "Reply",
    "anthropic_message",
    "chat_completion",
    "fake_vllm_main",
    "main",
    "route_of",
]


if __name__ == "__main__":
    sys.exit(main())
