"""A stand-in for a vLLM-Omni server (standard library + numpy/soundfile), for tests.

It speaks the wire protocol the backend uses: ``GET /health``, ``GET /v1/models`` and
``POST /v1/chat/completions``.  A request whose ``modalities`` include ``"audio"`` is answered as
vLLM-Omni answers Qwen2.5-Omni: one choice with the text, another with ``message.audio.data`` (a
base64 16-bit WAV at 24 kHz).  Answers come from a queue of :class:`Turn` scripts (then a default
turn); every request is recorded.  It is not a model.

``python qwen25omni_fake_server.py serve MODEL --omni --host H --port P [ignored flags]`` behaves
like ``vllm serve`` for a launcher: it refuses to start without ``--omni``, prints its argv, becomes
healthy after ``FAKE_OMNI_STARTUP_S`` seconds, writes its pid to ``FAKE_OMNI_PIDFILE``, records
requests to ``FAKE_OMNI_RECORD`` (JSON lines) and exits with status 3 after printing
``FAKE_OMNI_FAIL`` when that is set; SIGTERM stops it.
"""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

QUOTE = "The moon fell behind the hill!"
PASS1_TEXT = f'"{QUOTE}"'
NARRATION = f'Pip tapped the glass. "{QUOTE}" he whispered.'
IMAGE_PROMPT = "A small orange fox taps on a bedroom window at night, flat shapes, night colours"
PASS2_TEXT = "```json\n" + json.dumps({"text": NARRATION, "t2i": IMAGE_PROMPT}) + "\n```"
SAMPLE_RATE = 24_000


def tone(seconds: float = 0.5, hz: float = 220.0) -> np.ndarray:
    t = np.arange(int(SAMPLE_RATE * seconds), dtype=np.float32) / SAMPLE_RATE
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def tone_wav(seconds: float = 0.5, hz: float = 220.0) -> bytes:
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, tone(seconds, hz), SAMPLE_RATE, format="WAV", subtype="PCM_16")
    return buf.getvalue()


@dataclass
class Turn:
    """One scripted answer: ``text`` (None = pass 1's or pass 2's default, by the requested
    modalities), ``audio`` (sent when audio was requested), or an HTTP error ``status``."""

    text: str | None = None
    audio: bool = True
    status: int = 200
    message: str = "scripted server error"


class FakeOmniServer:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        served_model: str | None = None,
        record_path: str | None = None,
        wav: bytes | None = None,
    ) -> None:
        self.served_model = served_model
        self.record_path = record_path
        self.wav = wav or tone_wav()
        self.requests: list[dict[str, Any]] = []
        self.script: deque[Turn] = deque()
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *turns: Turn) -> None:
        with self.lock:
            self.script.extend(turns)

    def chats(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r["body"] for r in self.requests if r["path"] == "/v1/chat/completions"]

    def start(self) -> FakeOmniServer:
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeOmniServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record(self, method: str, path: str, body: Any) -> None:
        entry = {"method": method, "path": path, "body": body}
        with self.lock:
            self.requests.append(entry)
        if self.record_path:
            with open(self.record_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        model = body.get("model")
        if self.served_model and model != self.served_model:
            return 404, {
                "object": "error",
                "message": f"The model `{model}` does not exist.",
                "type": "NotFoundError",
                "code": 404,
            }
        with self.lock:
            turn = self.script.popleft() if self.script else Turn()
        if turn.status != 200:
            return turn.status, {
                "object": "error",
                "message": turn.message,
                "type": "InternalServerError",
                "code": turn.status,
            }
        wants_audio = "audio" in (body.get("modalities") or [])
        text = turn.text if turn.text is not None else (PASS1_TEXT if wants_audio else PASS2_TEXT)
        choices = [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": text},
            }
        ]
        if wants_audio and turn.audio:
            choices.append(
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "logprobs": None,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "audio": {
                            "id": "audio-local",
                            "data": base64.b64encode(self.wav).decode(),
                            "expires_at": int(time.time()) + 86400,
                            "transcript": "",
                        },
                    },
                }
            )
        return 200, {
            "id": "chatcmpl-local",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "usage": {"prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333},
        }


def _handler(server: FakeOmniServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def _send(self, status: int, payload: Any) -> None:
            body = json.dumps(payload).encode() if payload is not None else b""
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_GET(self) -> None:  # noqa: N802
            server.record("GET", self.path, None)
            if self.path == "/health":
                self._send(200, None)
            elif self.path == "/v1/models":
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": server.served_model or "model", "object": "model"}],
                    },
                )
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
            server.record("POST", self.path, body)
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            status, payload = server.answer(body)
            self._send(status, payload)

    return Handler


def serve_main(argv: list[str]) -> int:
    """``serve MODEL --omni [--host H] [--port P] ...`` (see the module docstring)."""
    if len(argv) < 2 or argv[0] != "serve":
        print("usage: serve MODEL --omni [--host H] [--port P]", file=sys.stderr)
        return 2
    model, rest = argv[1], argv[2:]
    print(f"fake vllm-omni: argv {json.dumps(argv)}", flush=True)
    if "--omni" not in rest:
        print("fake vllm-omni: without --omni this would be plain vLLM (no audio)", flush=True)
        return 2
    failure = os.environ.get("FAKE_OMNI_FAIL")
    if failure:
        print(failure, flush=True)
        return 3
    host, port = "127.0.0.1", 8000
    for i, arg in enumerate(rest[:-1]):
        if arg == "--host":
            host = rest[i + 1]
        elif arg == "--port":
            port = int(rest[i + 1])
    pidfile = os.environ.get("FAKE_OMNI_PIDFILE")
    if pidfile:
        with open(pidfile, "w", encoding="utf-8") as fh:
            fh.write(str(os.getpid()))
    time.sleep(float(os.environ.get("FAKE_OMNI_STARTUP_S") or 0))
    server = FakeOmniServer(
        host, port, served_model=model, record_path=os.environ.get("FAKE_OMNI_RECORD") or None
    )

    def terminate(signum: int, frame: Any) -> None:
        threading.Thread(target=server.httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, terminate)
    print(f"fake vllm-omni: serving {model} on http://{host}:{server.port}", flush=True)
    server.httpd.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1:]))
