"""A local stand-in for an OmniServe Track B endpoint (standard library + PIL/soundfile only).

It speaks the wire format the ``hyperclova`` backbone meets on the real server, as read from
OmniServe's chainer (``omni_chainer/core/openai/v1/track_b.py``):

* ``POST /b/v1/chat/completions`` -> a Chat Completions body.  A request with the
  ``t2i_model_generation`` tool is an image request: the answer is that tool call whose
  ``arguments`` JSON has ``discrete_image_token`` replaced by a signed PNG URL.  A request whose
  user content carries an image but no tool is a text request (answered with ``text``).  Anything
  else is a speech request: ``message.audio`` = ``{id, data, transcript, expires_at}`` with
  ``data`` the URL-safe base64 (unpadded here) of a signed WAV URL;
* ``GET /media/<name>`` serves the generated files; names registered as forbidden answer 403 like
  an expired signed URL.

It is not a model: it lets the real ``openai`` SDK, the retries and the downloads be exercised.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_TEXT = "NARRATION: Pip tapped on the glass again.\nSPEECH: Lena, the moon fell down!"


def png_bytes(size: int = 12, colour: tuple[int, int, int] = (200, 80, 40)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buf, format="PNG")
    return buf.getvalue()


def wav_bytes(seconds: float = 0.2, rate: int = 16000, channels: int = 1) -> bytes:
    import numpy as np
    import soundfile as sf

    t = np.arange(int(seconds * rate)) / rate
    wave = 0.3 * np.sin(2 * np.pi * 440 * t).astype(np.float32)
    data = np.stack([wave] * channels, axis=1) if channels > 1 else wave
    buf = io.BytesIO()
    sf.write(buf, data, rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


@dataclass
class Reply:
    """One scripted answer for a request kind (``text``, ``image`` or ``speech``).

    ``status`` != 200 answers with an OpenAI-style error body and ``headers``; ``message``
    replaces the whole assistant message; ``text`` only its content; ``delay_s`` waits first.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    message: dict[str, Any] | None = None
    text: str | None = None
    delay_s: float = 0.0


@dataclass
class Seen:
    kind: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float

    @property
    def prompt(self) -> str:
        """The concatenated text parts of the request's messages."""
        parts = []
        for message in self.body.get("messages", []):
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            else:
                parts += [p.get("text", "") for p in content or [] if p.get("type") == "text"]
        return "\n".join(parts)


class FakeOmniServe:
    def __init__(self, text: str = DEFAULT_TEXT) -> None:
        self.text = text
        self.requests: list[Seen] = []
        self.media_requests: list[tuple[str, dict[str, str]]] = []
        self.media: dict[str, bytes] = {}
        self.forbidden: set[str] = set()
        #: a request whose prompt contains one of these markers gets a forbidden media URL
        self.forbid_when: dict[str, str] = {}
        self.scripts: dict[str, deque[Reply]] = {
            "text": deque(),
            "image": deque(),
            "speech": deque(),
        }
        self.peak_in_flight = 0
        self._in_flight = 0
        self._counter = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    # -- control -------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/b/v1"

    def script(self, kind: str, *replies: Reply) -> None:
        with self._lock:
            self.scripts[kind].extend(replies)

    def of(self, kind: str) -> list[Seen]:
        with self._lock:
            return [r for r in self.requests if r.kind == kind]

    def __enter__(self) -> FakeOmniServe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- answers -------------------------------------------------------------------------------
    def _next_name(self, stem: str, ext: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{stem}-{self._counter}.{ext}"

    def _publish(self, seen: Seen, stem: str, ext: str, data: bytes) -> str:
        name = self._next_name(stem, ext)
        with self._lock:
            self.media[name] = data
            marker = self.forbid_when.get(seen.kind)
            if marker and marker in seen.prompt:
                self.forbidden.add(name)
        return f"{self.url}/media/{name}?X-Amz-Expires=3600&X-Amz-Signature=sig{len(name)}"

    def answer(self, seen: Seen) -> tuple[int, dict[str, str], dict[str, Any]]:
        with self._lock:
            queue = self.scripts[seen.kind]
            reply = queue.popleft() if queue else Reply()
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if reply.status != 200:
            body = {
                "error": {
                    "message": f"scripted {reply.status}",
                    "type": "error",
                    "code": reply.status,
                }
            }
            return reply.status, reply.headers, body
        message: dict[str, Any]
        finish = "stop"
        if reply.message is not None:
            message = {"role": "assistant", **reply.message}
        elif seen.kind == "text":
            message = {
                "role": "assistant",
                "content": self.text if reply.text is None else reply.text,
            }
        elif seen.kind == "image":
            url = self._publish(seen, "image", "png", png_bytes())
            message = {
                "role": "assistant",
                "content": reply.text,
                "tool_calls": [
                    {
                        "id": "chatcmpl-tool-1",
                        "type": "function",
                        "function": {
                            "name": "t2i_model_generation",
                            "arguments": json.dumps({"discrete_image_token": url}),
                        },
                    }
                ],
            }
            finish = "tool_calls"
        else:
            url = self._publish(seen, "speech", "wav", wav_bytes())
            data = base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
            transcript = reply.text or "spoken"
            message = {
                "role": "assistant",
                "content": transcript,
                "audio": {
                    "id": data,
                    "data": data,
                    "transcript": transcript,
                    "expires_at": int(time.time()) + 3600,
                },
            }
        body = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": seen.body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        }
        return 200, {}, body


def _kind(body: dict[str, Any]) -> str:
    if any(
        (t.get("function") or {}).get("name") == "t2i_model_generation"
        for t in body.get("tools") or []
    ):
        return "image"
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list) and any(p.get("type") == "image_url" for p in content):
            return "text"
    return "speech"


def _handler(server: FakeOmniServe) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def _send(
            self, status: int, headers: dict[str, str], body: bytes, content_type: str
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?", 1)[0]
            with server._lock:
                server.media_requests.append(
                    (self.path, {k.lower(): v for k, v in self.headers.items()})
                )
            name = path.removeprefix("/media/")
            if not path.startswith("/media/") or name not in server.media:
                self._send(404, {}, b"<Error><Code>NoSuchKey</Code></Error>", "application/xml")
            elif name in server.forbidden:
                self._send(
                    403,
                    {},
                    b"<Error><Code>AccessDenied</Code><Message>Request has "
                    b"expired</Message></Error>",
                    "application/xml",
                )
            else:
                ctype = "image/png" if name.endswith(".png") else "audio/wav"
                self._send(200, {}, server.media[name], ctype)

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/b/v1/chat/completions":
                self._send(404, {}, b'{"error": {"message": "no route"}}', "application/json")
                return
            seen = Seen(
                _kind(body), body, {k.lower(): v for k, v in self.headers.items()}, time.monotonic()
            )
            with server._lock:
                server.requests.append(seen)
                server._in_flight += 1
                server.peak_in_flight = max(server.peak_in_flight, server._in_flight)
            try:
                status, headers, payload = server.answer(seen)
            finally:
                with server._lock:
                    server._in_flight -= 1
            self._send(status, headers, json.dumps(payload).encode(), "application/json")

    return Handler
