"""A minimal chat-completions server on 127.0.0.1, for tests and benchmarks of the judge backends.

It speaks the OpenAI wire protocol (``POST /v1/chat/completions``, JSON in and out, error bodies
with HTTP status codes and headers) so the real ``openai`` SDK can be pointed at it.  A
``responder(request_body) -> Reply`` decides each answer; the server records every request body
and the number of requests it was serving at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One server answer: a completion text, or an HTTP error with headers."""

    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str = "stop"
    delay: float = 0.0  # seconds to hold the request open (to observe concurrency)
    error_message: str = "error"


def completion_body(model: str, content: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": 1,
            "completion_tokens": max(len(content.split()), 1),
            "total_tokens": max(len(content.split()), 1) + 1,
        },
    }


class LocalChatServer:
    """``with LocalChatServer(responder) as server: OpenAI(base_url=server.base_url)``."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply]):
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # header and body go out as separate writes

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(body).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                    return
                with owner._lock:
                    owner.requests.append(body)
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                try:
                    reply = owner.responder(body)
                    if reply.delay:
                        time.sleep(reply.delay)
                finally:
                    with owner._lock:
                        owner.in_flight -= 1
                if reply.status != 200:
                    error = {"error": {"message": reply.error_message, "type": "local_error"}}
                    self._send(reply.status, error, reply.headers)
                    return
                model = str(body.get("model", ""))
                content = reply.content or ""
                self._send(200, completion_body(model, content, reply.finish_reason), reply.headers)

        return Handler

    def start(self) -> LocalChatServer:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LocalChatServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
