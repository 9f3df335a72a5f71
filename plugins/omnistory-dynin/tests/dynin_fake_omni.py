"""A local stand-in for a vLLM-Omni server serving Dynin-Omni (standard library + PIL/soundfile).

It answers the routes the ``vllm_omni`` backend uses, in the shape read from vLLM-Omni's chat
serving code: ``GET /health``; ``POST /v1/chat/completions`` -> one choice per output modality
(text: ``message.content`` a string; image: ``message.content`` a list holding one ``image_url``
part with a PNG data URL; audio: ``message.audio`` = ``{id, data, expires_at, transcript}`` with
``data`` the base64 of a WAV file).  It is not a model.

``mode`` picks the answer: ``full``, ``no_audio``, ``image_placeholder`` (the image choice holds
vLLM-Omni's "no images were produced" text part), ``text_only``.  ``fail_first`` answers that many
requests with HTTP 503 first.  Every request is appended to ``records`` (and to the JSON-lines
file named by ``$OMNISTORY_FAKE_OMNI_RECORD`` when set), with data URLs shortened.

``python dynin_fake_omni.py serve <model> --omni --host H --port P ...`` (what the fake ``vllm``
executable runs) prints its argv, writes its pid to ``$OMNISTORY_FAKE_OMNI_PIDFILE``, exits 3 when
``$OMNISTORY_FAKE_OMNI_FAIL`` is set, and answers ``/health`` only after
``$OMNISTORY_FAKE_OMNI_STARTUP_S`` seconds.
"""

from __future__ import annotations

import base64
import io
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NARRATION = 'Pip pressed his nose to the glass. "The moon rolled away!" he cried.'
NO_IMAGE_TEXT = "Image generation completed but no images were produced."


def png_bytes(size: int = 48, colour: tuple[int, int, int] = (30, 60, 200)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buf, format="PNG")
    return buf.getvalue()


def wav_bytes(seconds: float = 0.5, rate: int = 24000) -> bytes:
    import numpy as np
    import soundfile as sf

    t = np.arange(int(seconds * rate)) / rate
    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(2 * np.pi * 330 * t)).astype(np.float32), rate, format="WAV")
    return buf.getvalue()


def completion(mode: str, model: str) -> dict[str, Any]:
    choices: list[dict[str, Any]] = [
        {
            "index": 0,
            "message": {"role": "assistant", "content": NARRATION},
            "finish_reason": "stop",
        }
    ]
    if mode in ("full", "no_audio"):
        url = "data:image/png;base64," + base64.b64encode(png_bytes()).decode("ascii")
        part = {"type": "image_url", "image_url": {"url": url}}
        choices.append({"index": 0, "message": {"role": "assistant", "content": [part]}})
    if mode == "image_placeholder":
        part = {"type": "text", "text": NO_IMAGE_TEXT}
        choices.append({"index": 0, "message": {"role": "assistant", "content": [part]}})
    if mode in ("full", "image_placeholder"):
        audio = {
            "id": "audio-0",
            "data": base64.b64encode(wav_bytes()).decode("ascii"),
            "expires_at": int(time.time()) + 3600,
            "transcript": "",
        }
        choices.append({"index": 0, "message": {"role": "assistant", "audio": audio}})
    for choice in choices:
        choice.setdefault("finish_reason", "stop")
        choice.setdefault("logprobs", None)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {"prompt_tokens": 900, "completion_tokens": 700, "total_tokens": 1600},
    }


def _shorten(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    if isinstance(value, str) and value.startswith("data:") and len(value) > 80:
        return value[:40] + f"...<{len(value)} chars>"
    return value


class FakeOmni(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0, mode: str = "full") -> None:
        super().__init__((host, port), _Handler)
        self.mode = mode
        self.fail_first = 0
        self.healthy_at = 0.0
        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.records.append(entry)
            path = os.environ.get("OMNISTORY_FAKE_OMNI_RECORD")
            if path:
                with open(path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")


class _Handler(BaseHTTPRequestHandler):
    server: FakeOmni

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self.server.record({"method": "GET", "path": self.path})
        if self.path == "/health":
            if time.time() < self.server.healthy_at:
                self._send(503, {"error": "starting"})
            else:
                self._send(200, {})
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "dynin", "object": "model"}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.record({"method": "POST", "path": self.path, "body": _shorten(body)})
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": "not found"})
            return
        with self.server.lock:
            failing = self.server.fail_first > 0
            if failing:
                self.server.fail_first -= 1
        if failing:
            self._send(503, {"error": {"message": "engine busy", "type": "ServiceUnavailable"}})
            return
        self._send(200, completion(self.server.mode, str(body.get("model"))))


def start(mode: str = "full") -> FakeOmni:
    """A server on a free port of 127.0.0.1, serving from a daemon thread."""
    server = FakeOmni(mode=mode)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    print("fake vllm: argv " + json.dumps(argv), flush=True)
    pidfile = os.environ.get("OMNISTORY_FAKE_OMNI_PIDFILE")
    if pidfile:
        with open(pidfile, "w") as fh:
            fh.write(str(os.getpid()))
    failure = os.environ.get("OMNISTORY_FAKE_OMNI_FAIL")
    if failure:
        print(f"fake vllm: {failure}", flush=True)
        return 3
    if not argv or argv[0] != "serve" or "--omni" not in argv:
        print("fake vllm: expected `serve <model> --omni ...`", flush=True)
        return 2
    host = argv[argv.index("--host") + 1] if "--host" in argv else "127.0.0.1"
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 8000
    server = FakeOmni(host, port, mode=os.environ.get("OMNISTORY_FAKE_OMNI_MODE", "full"))
    server.healthy_at = time.time() + float(os.environ.get("OMNISTORY_FAKE_OMNI_STARTUP_S", "0"))
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
