"""A local stand-in for the hosted image APIs, for tests and offline demos (stdlib only).

:class:`ImageServer` listens on 127.0.0.1 and speaks the wire formats the real SDKs use:

* Gemini ``generateContent`` (``POST .../models/{model}:generateContent``, what ``google-genai``
  sends): the answer's first candidate holds a text part and an ``inlineData`` PNG, with
  ``usageMetadata``; errors are Google's ``{"error": {"code", "message", "status"}}``;
* the OpenAI Images API: ``POST /v1/images/generations`` (JSON; also what Seedream's
  OpenAI-style endpoint takes, with its ``image`` list) and ``POST /v1/images/edits``
  (multipart/form-data, repeated ``image[]`` files); answers ``{"created", "data": [{"b64_json"}],
  "usage"}``; errors are ``{"error": {"message", "type", "code"}}``.

Their batch protocols (Gemini batch jobs, OpenAI Files + Batches on the Images endpoints) are
:class:`~omnistory_testkit.image_batch_server.ImageBatchServer`'s, a subclass.

Every request is recorded (:class:`ImageRequest`: the JSON body, or the multipart fields and the
files in order).  Each answer is the route's next scripted :class:`ImageReply`, else an image: a
small PNG whose colour is taken from the request's content hash, so the same request gets the
same image (a JSON body's hash is that of its canonical JSON: the same request in a batch line
gets the same image too) and a test can tell answers apart (:attr:`ImageServer.images` lists the
PNG bytes answered, in order).  It is not a model: it lets the real SDK clients, retries and usage
accounting of the image experts run without a network::

    with ImageServer() as server:
        server.script("gemini", ImageReply.rate_limited(), ImageReply())
        expert = NanoBanana(base_url=server.url, api_key_env="KEY")
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import hashlib
import io
import json
import re
import struct
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GEMINI_PATH = re.compile(r"/models/(?P<model>[^/:]+):generateContent$")
#: Google's status names of the HTTP codes the tests use
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


@dataclass
class ImageReply:
    """One scripted answer.

    ``status`` 200 answers an image (``empty``: an answer without one; ``declined``: the
    provider's refusal of a 200 answer, Gemini's ``promptFeedback.blockReason``); other statuses
    answer the route's error body with ``message`` and ``code`` (an OpenAI/Ark error code such as
    ``moderation_blocked``).  ``headers`` go with it (``Retry-After``)."""

    status: int = 200
    message: str = "scripted error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    empty: bool = False
    declined: bool = False
    delay_s: float = 0.0

    @classmethod
    def rate_limited(cls, retry_after: str = "1") -> ImageReply:
        return cls(status=429, headers={"Retry-After": retry_after}, message="rate limited")


@dataclass
class ImageRequest:
    """One request as received: path, lower-cased headers, and the JSON ``body`` or, for a
    multipart upload, ``fields`` (name -> text) and ``files`` (field name, filename, content
    type, bytes) in order."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any = None
    fields: dict[str, str] = field(default_factory=dict)
    files: list[tuple[str, str, str, bytes]] = field(default_factory=list)

    @property
    def route(self) -> str | None:
        return route_of(self.path)


def route_of(path: str) -> str | None:
    """``gemini``, ``images`` (generations) or ``edits`` for a POST path."""
    bare = path.split("?", 1)[0]
    if GEMINI_PATH.search(bare):
        return "gemini"
    if bare.endswith("/images/generations"):
        return "images"
    if bare.endswith("/images/edits"):
        return "edits"
    return None


def png_bytes(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A ``width`` x ``height`` PNG of one colour (zlib only)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return (
            struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
        )

    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


def _multipart(
    content_type: str, raw: bytes
) -> tuple[dict[str, str], list[tuple[str, str, str, bytes]]]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw
    )
    fields: dict[str, str] = {}
    files: list[tuple[str, str, str, bytes]] = []
    for part in message.iter_parts():
        name = str(part.get_param("name", header="content-disposition") or "")
        filename = part.get_filename()
        raw_payload = part.get_payload(decode=True)
        payload = raw_payload if isinstance(raw_payload, bytes) else b""
        if filename is not None:
            files.append((name, filename, part.get_content_type(), payload))
        else:
            fields[name] = payload.decode("utf-8")
    return fields, files


class ImageServer:
    """Threaded HTTP server on 127.0.0.1 speaking the image APIs (see the module docstring).

    ``image_size``: the (width, height) of every answered image; ``usage``: the (input, output)
    token counts reported."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        image_size: tuple[int, int] = (32, 18),
        usage: tuple[int, int] = (600, 1290),
    ) -> None:
        self.image_size = image_size
        self.usage = usage
        self.recorded: list[ImageRequest] = []
        self.images: list[bytes] = []
        self._lock = threading.Lock()
        self._scripts: dict[str, deque[ImageReply]] = {
            "gemini": deque(),
            "images": deque(),
            "edits": deque(),
        }
        self._httpd = ThreadingHTTPServer((host, port), self.handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        """The request handler (a subclass speaking more routes extends it)."""
        return _handler_for(self)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{int(self._httpd.server_address[1])}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def script(self, route: str, *replies: ImageReply) -> None:
        """Queue answers for ``route`` (``gemini``, ``images`` or ``edits``), used in order."""
        with self._lock:
            self._scripts[route].extend(replies)

    def requests_for(self, route: str) -> list[ImageRequest]:
        with self._lock:
            return [r for r in self.recorded if r.route == route]

    def start(self) -> ImageServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ImageServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answers -----------------------------------------------------------------------------
    def _next(self, route: str) -> ImageReply:
        with self._lock:
            queue = self._scripts[route]
            return queue.popleft() if queue else ImageReply()

    def _image(self, seed: bytes) -> bytes:
        digest = hashlib.sha256(seed).digest()
        data = png_bytes(*self.image_size, (digest[0], digest[1], digest[2]))
        with self._lock:
            self.images.append(data)
        return data

    def answer(self, request: ImageRequest, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        if request.files or request.fields:  # the content, not the multipart boundary
            raw = json.dumps(request.fields, sort_keys=True).encode("utf-8") + b"".join(
                f[3] for f in request.files
            )
        elif isinstance(request.body, dict):  # the content, not its spacing or key order
            raw = json.dumps(request.body, sort_keys=True).encode("utf-8")
        route = request.route
        assert route is not None
        reply = self._next(route)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if reply.status != 200:
            return reply.status, reply.headers, _error(route, reply)
        if route == "gemini":
            return 200, reply.headers, self._gemini(request, reply, raw)
        body = request.body if isinstance(request.body, dict) else request.fields
        payload: dict[str, Any] = {"created": int(time.time()), "data": []}
        if not reply.empty:
            data = self._image(raw)
            payload["data"] = [{"b64_json": base64.b64encode(data).decode("ascii")}]
            payload["size"] = "x".join(map(str, self.image_size))
        payload["usage"] = {
            "input_tokens": self.usage[0],
            "output_tokens": self.usage[1],
            "total_tokens": sum(self.usage),
            "generated_images": 0 if reply.empty else 1,
            "input_tokens_details": {"text_tokens": self.usage[0], "image_tokens": 0},
        }
        payload["model"] = str(body.get("model") or "")
        return 200, reply.headers, json.dumps(payload).encode("utf-8")

    def _gemini(self, request: ImageRequest, reply: ImageReply, raw: bytes) -> bytes:
        usage = {
            "promptTokenCount": self.usage[0],
            "candidatesTokenCount": 0 if (reply.empty or reply.declined) else self.usage[1],
            "totalTokenCount": self.usage[0] + self.usage[1],
        }
        if reply.declined:
            feedback = {"blockReason": "PROHIBITED_CONTENT", "blockReasonMessage": reply.message}
            return json.dumps({"promptFeedback": feedback, "usageMetadata": usage}).encode()
        parts: list[dict[str, Any]] = [{"text": "Here is the picture."}]
        if not reply.empty:
            data = base64.b64encode(self._image(raw)).decode("ascii")
            parts.append({"inlineData": {"mimeType": "image/png", "data": data}})
        match = GEMINI_PATH.search(request.path.split("?", 1)[0])
        payload = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": usage,
            "modelVersion": match.group("model") if match else "",
        }
        return json.dumps(payload).encode("utf-8")


def _error(route: str, reply: ImageReply) -> bytes:
    if route == "gemini":
        status = GOOGLE_STATUS.get(reply.status, "UNKNOWN")
        return json.dumps(
            {"error": {"code": reply.status, "message": reply.message, "status": status}}
        ).encode("utf-8")
    error = {"message": reply.message, "type": "invalid_request_error", "code": reply.code}
    return json.dumps({"error": error}).encode("utf-8")


def _handler_for(server: ImageServer) -> type[BaseHTTPRequestHandler]:
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
                pass

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {str(k).lower(): str(v) for k, v in self.headers.items()}
            request = ImageRequest("POST", self.path, headers)
            content_type = headers.get("content-type", "")
            if content_type.startswith("multipart/form-data"):
                request.fields, request.files = _multipart(content_type, raw)
            else:
                try:
                    request.body = json.loads(raw or b"null")
                except ValueError:
                    request.body = raw.decode("utf-8", "replace")
            with server._lock:
                server.recorded.append(request)
            if request.route is None:
                self._send(404, {}, b'{"error": {"message": "no such route"}}')
                return
            self._send(*server.answer(request, raw))

    return Handler


def decode_png(data: bytes) -> tuple[int, int]:
    """(width, height) of PNG bytes (for tests that check what was answered)."""
    width, height = struct.unpack(">II", io.BytesIO(data).getbuffer()[16:24])
    return int(width), int(height)


__all__ = ["ImageReply", "ImageRequest", "ImageServer", "decode_png", "png_bytes", "route_of"]
