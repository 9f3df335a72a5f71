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

It also speaks the providers' batch protocols, in their wire formats, as the SDKs parse them:

* OpenAI Files and Batches: ``POST /v1/files`` (multipart upload, purpose ``batch``),
  ``GET /v1/files/{id}`` and ``/v1/files/{id}/content``, ``POST /v1/batches`` (endpoint
  ``/v1/chat/completions``), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``.  A Batch
  goes validating -> in_progress -> finalizing -> completed (or expired, failed, cancelled); its
  ``output_file_id`` holds the lines answered 200 and its ``error_file_id`` the others
  (``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``);
* Anthropic Message Batches: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``
  (``processing_status`` in_progress -> ended, ``request_counts``, ``results_url``),
  ``GET /v1/messages/batches/{id}/results`` (JSONL of ``{"custom_id", "result": {"type":
  "succeeded", "message"} | {"type": "errored", "error"} | {"type": "expired"} | {"type":
  "canceled"}}``), ``POST /v1/messages/batches/{id}/cancel``.

Each request line of a batch is answered, when the batch ends, by the route's own logic (the
next scripted :class:`Reply` of ``chat`` or ``messages``, else the responder, else a valid plan),
in the order of the lines: a scripted error Reply makes that line an errored result.  A batch
ends on its ``batch_polls``-th poll (the server's default, 1: the first); :meth:`FakeServer.
script_batch` decides the fate of the next batches created (:class:`BatchFate`: ``completed``,
``expired`` or ``cancelled`` after some lines, ``failed`` validation, or ``pending`` until
:meth:`FakeServer.end_batches`), and :meth:`FakeServer.batch_creations` counts the batches
created.  Batch lines are not requests of the ``chat``/``messages`` routes: only synchronous calls
are.

``python -m omnistory_testkit.servers serve MODEL --host H --port P [ignored vllm flags]``
behaves like ``vllm serve`` as far as a launcher can tell (it becomes healthy, serves the
OpenAI-compatible routes for MODEL, stops on SIGTERM); environment variables
``OMNISTORY_FAKE_VLLM_STARTUP_S`` (delay before listening), ``OMNISTORY_FAKE_VLLM_RECORD``
(append requests as JSON lines), ``OMNISTORY_FAKE_VLLM_PIDFILE`` and ``OMNISTORY_FAKE_VLLM_FAIL``
(print it to stderr and exit 3) steer it in launcher tests.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import os
import re
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from datetime import datetime, timedelta, timezone
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

#: (method, path pattern) -> route name of the batch protocols (a path may have a prefix)
BATCH_ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (method, re.compile(pattern), name)
    for method, pattern, name in (
        ("POST", r"/messages/batches$", "message_batches"),
        ("GET", r"/messages/batches/(?P<id>[^/?]+)$", "message_batch"),
        ("GET", r"/messages/batches/(?P<id>[^/?]+)/results$", "message_batch_results"),
        ("POST", r"/messages/batches/(?P<id>[^/?]+)/cancel$", "message_batch_cancel"),
        ("POST", r"/files$", "files"),
        ("GET", r"/files/(?P<id>[^/?]+)$", "file"),
        ("GET", r"/files/(?P<id>[^/?]+)/content$", "file_content"),
        ("POST", r"/batches$", "batches"),
        ("GET", r"/batches/(?P<id>[^/?]+)$", "batch"),
        ("POST", r"/batches/(?P<id>[^/?]+)/cancel$", "batch_cancel"),
    )
)


def batch_route_of(method: str, path: str) -> tuple[str, str | None] | None:
    """The batch-protocol route of a request and the id in its path, or None."""
    bare = path.split("?", 1)[0]
    for route_method, pattern, name in BATCH_ROUTES:
        if method == route_method:
            match = pattern.search(bare)
            if match:
                return name, match.groupdict().get("id")
    return None


def route_of(path: str) -> str | None:
    """``chat`` or ``messages`` for a POST path (any prefix before the API's own suffix)."""
    if batch_route_of("POST", path) is not None:
        return None
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
        """``chat`` / ``messages`` (synchronous calls), a batch route (``files``, ``batches``,
        ``batch``, ``file_content``, ``message_batches``, ``message_batch``, ...) or None."""
        batch = batch_route_of(self.method, self.path)
        if batch is not None:
            return batch[0]
        return route_of(self.path) if self.method == "POST" else None


@dataclass
class BatchFate:
    """What becomes of one batch the server creates (see :meth:`FakeServer.script_batch`).

    ``status``: ``completed`` (every line answered), ``expired`` / ``cancelled`` (the first
    ``answered`` lines answered, the others expired / canceled), ``failed`` (OpenAI: the batch
    fails validation, no results; Anthropic: the create request is refused with HTTP 400, as a
    Message Batch that fails validation is), ``pending`` (never ends until
    :meth:`FakeServer.end_batches`).  ``polls``: the poll that ends it (None: the server's
    ``batch_polls``)."""

    status: str = "completed"
    answered: int = 0
    polls: int | None = None
    message: str = "scripted batch failure"


@dataclass
class _Batch:
    """One batch the server holds."""

    id: str
    kind: str  # "openai" | "anthropic"
    lines: list[tuple[str, Any]]  # (custom_id, request body)
    fate: BatchFate
    polls_to_end: int | None
    created: float
    input_file_id: str | None = None
    endpoint: str = "/v1/chat/completions"
    polls: int = 0
    ended: bool = False
    results: list[dict[str, Any]] = field(default_factory=list)
    output_file_id: str | None = None
    error_file_id: str | None = None
    cancel: bool = False


class FakeServer:
    """Threaded HTTP server on 127.0.0.1 (port 0 = any free port); see the module docstring.

    * ``responder(body) -> Reply`` answers requests that no script covers;
    * ``usage=(prompt, completion)`` token counts in every answer; ``None`` counts the words of
      the answer as completion tokens;
    * ``served_model`` makes the chat route answer 404 for other model names, as vLLM does;
    * ``hold_until_concurrent=n`` holds each request until n are in flight (or ``hold_timeout_s``
      passes) and then ``hold_settle_s`` more, so a client's concurrency shows in
      ``peak_in_flight`` without timing assumptions about the client;
    * ``record_path`` appends every request as a JSON line (for servers in another process);
    * ``batch_polls``: a batch ends on this poll (1: the first).
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
        batch_polls: int = 1,
    ) -> None:
        self.responder = responder
        self.batch_polls = batch_polls
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
        self._fates: deque[BatchFate] = deque()
        self.batches: dict[str, _Batch] = {}
        self.files: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)
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

    def script_batch(self, *fates: BatchFate) -> None:
        """Queue the fates of the next batches created (either protocol), in order; a batch
        created with none queued completes on its ``batch_polls``-th poll."""
        with self._lock:
            self._fates.extend(fates)

    def end_batches(self) -> None:
        """Every batch still running ends on its next poll (``pending`` ones complete)."""
        with self._lock:
            for batch in self.batches.values():
                if not batch.ended:
                    if batch.fate.status == "pending":
                        batch.fate = BatchFate("completed")
                    batch.polls_to_end = batch.polls + 1

    def batch_creations(self) -> int:
        """How many batches were created (both protocols; refused creations included)."""
        return len(self.requests_for("batches")) + len(self.requests_for("message_batches"))

    def batch_lines(self) -> list[Any]:
        """The request bodies of every batch created, in order of creation and lines."""
        with self._lock:
            return [body for batch in self.batches.values() for _, body in batch.lines]

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

    # -- batch protocols ---------------------------------------------------------------------
    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    def _new_batch(self, kind: str, lines: list[tuple[str, Any]], **extra: Any) -> _Batch:
        with self._lock:
            fate = self._fates.popleft() if self._fates else BatchFate()
            prefix = "batch_" if kind == "openai" else "msgbatch_"
            batch = _Batch(
                id=self._new_id(prefix),
                kind=kind,
                lines=lines,
                fate=fate,
                polls_to_end=None if fate.status == "pending" else (fate.polls or self.batch_polls),
                created=time.time(),
                **extra,
            )
            self.batches[batch.id] = batch
        return batch

    def _advance(self, batch: _Batch) -> None:
        """One poll of ``batch``: it ends (its lines are answered) on its last poll."""
        with self._lock:
            if batch.ended:
                return
            batch.polls += 1
            if batch.cancel or (
                batch.polls_to_end is not None and batch.polls >= batch.polls_to_end
            ):
                self._finish(batch)

    def _finish(self, batch: _Batch) -> None:
        status = "cancelled" if batch.cancel else batch.fate.status
        if status == "pending":  # cannot happen: a pending batch has no end
            return
        answered = len(batch.lines) if status == "completed" else batch.fate.answered
        route = "chat" if batch.kind == "openai" else "messages"
        results = []
        for n, (cid, body) in enumerate(batch.lines):
            if status == "failed":
                break
            if n < answered:
                code, _, payload = self.answer(route, body)
                results.append({"custom_id": cid, "status": code, "body": json.loads(payload)})
            else:
                results.append({"custom_id": cid, "status": None, "body": None})
        batch.results = results
        batch.ended = True
        batch.fate = BatchFate(status, batch.fate.answered, batch.fate.polls, batch.fate.message)
        if batch.kind == "openai" and status != "failed":
            self._write_openai_files(batch)

    def _write_openai_files(self, batch: _Batch) -> None:
        ok, errors = [], []
        for n, result in enumerate(batch.results):
            line: dict[str, Any] = {
                "id": f"batch_req_{batch.id}_{n}",
                "custom_id": result["custom_id"],
            }
            if result["status"] is None:
                code = "batch_expired" if batch.fate.status == "expired" else "batch_cancelled"
                message = (
                    "This request could not be executed before the completion window expired."
                    if code == "batch_expired"
                    else "This request was not executed because the batch was cancelled."
                )
                line.update(response=None, error={"code": code, "message": message})
                errors.append(line)
                continue
            line.update(
                response={
                    "status_code": result["status"],
                    "request_id": f"req_{batch.id}_{n}",
                    "body": result["body"],
                },
                error=None,
            )
            (ok if result["status"] == 200 else errors).append(line)
        for lines, attr in ((ok, "output_file_id"), (errors, "error_file_id")):
            if lines:
                content = "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")
                file_id = self._new_id("file-")
                self.files[file_id] = _file_object(
                    file_id, content, f"{attr}.jsonl", "batch_output"
                )
                setattr(batch, attr, file_id)

    def _openai_batch(self, batch: _Batch) -> dict[str, Any]:
        status = batch.fate.status if batch.ended else _running_status(batch)
        done = [r for r in batch.results if r["status"] == 200]
        counts = {
            "total": 0 if status == "failed" else len(batch.lines),
            "completed": len(done),
            "failed": len(batch.results) - len(done) if batch.ended and status != "failed" else 0,
        }
        created = int(batch.created)
        body: dict[str, Any] = {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "errors": None,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": created,
            "in_progress_at": created if status != "validating" else None,
            "expires_at": created + 86400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": counts,
            "metadata": {},
        }
        now = int(time.time())
        if batch.ended:
            stamp = {"completed": "completed_at", "expired": "expired_at"}.get(status)
            stamp = stamp or {"failed": "failed_at", "cancelled": "cancelled_at"}[status]
            body[stamp] = now
        if status == "failed":
            body["errors"] = {
                "object": "list",
                "data": [
                    {
                        "code": "invalid_request",
                        "message": batch.fate.message,
                        "param": None,
                        "line": None,
                    }
                ],
            }
        return body

    def _anthropic_batch(self, batch: _Batch) -> dict[str, Any]:
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        if not batch.ended:
            counts["processing"] = len(batch.lines)
        else:
            missing = "expired" if batch.fate.status == "expired" else "canceled"
            for result in batch.results:
                if result["status"] is None:
                    counts[missing] += 1
                else:
                    counts["succeeded" if result["status"] == 200 else "errored"] += 1
        created = datetime.fromtimestamp(batch.created, timezone.utc)
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended"
            if batch.ended
            else ("canceling" if batch.cancel else "in_progress"),
            "request_counts": counts,
            "ended_at": _rfc3339(datetime.now(timezone.utc)) if batch.ended else None,
            "created_at": _rfc3339(created),
            "expires_at": _rfc3339(created + timedelta(days=1)),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{self.url}/v1/messages/batches/{batch.id}/results"
            if batch.ended
            else None,
        }

    def answer_batch_route(
        self, name: str, ident: str | None, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for one request of the batch protocols."""
        not_found = (
            404,
            {},
            _dumps(
                {
                    "error": {
                        "message": f"no such object: {ident}",
                        "type": "invalid_request_error",
                        "code": None,
                        "param": None,
                    }
                }
            ),
        )
        if name == "files":
            fields = _multipart(headers.get("content-type", ""), raw)
            upload = fields.get("file")
            if upload is None:
                return 400, {}, _error_body("chat", 400, "no file in the upload")
            file_id = self._new_id("file-")
            purpose = (fields.get("purpose") or (None, b"batch"))[1].decode("utf-8")
            obj = _file_object(file_id, upload[1], upload[0] or "upload.jsonl", purpose)
            with self._lock:
                self.files[file_id] = obj
            return 200, {}, _dumps({k: v for k, v in obj.items() if k != "content"})
        if name in ("file", "file_content"):
            obj = self.files.get(ident or "")
            if obj is None:
                return not_found
            if name == "file":
                return 200, {}, _dumps({k: v for k, v in obj.items() if k != "content"})
            return 200, {"Content-Type": "application/octet-stream"}, obj["content"]
        body = json.loads(raw) if raw else None
        body = body if isinstance(body, dict) else {}
        if name == "batches":
            file = self.files.get(str(body.get("input_file_id")))
            if file is None:
                return 400, {}, _error_body("chat", 400, "input_file_id is not an uploaded file")
            lines = []
            for text in file["content"].decode("utf-8").splitlines():
                if text.strip():
                    line = json.loads(text)
                    lines.append((str(line["custom_id"]), line.get("body")))
            if len({cid for cid, _ in lines}) != len(lines):
                return 400, {}, _error_body("chat", 400, "duplicate custom_id in the batch")
            batch = self._new_batch(
                "openai", lines, input_file_id=file["id"], endpoint=str(body.get("endpoint"))
            )
            if batch.fate.status == "failed":
                with self._lock:
                    self._finish(batch)
            return 200, {}, _dumps(self._openai_batch(batch))
        if name == "message_batches":
            requests = body.get("requests") or []
            lines = [(str(r["custom_id"]), r.get("params")) for r in requests]
            with self._lock:
                refuse = self._fates and self._fates[0].status == "failed"
                message = self._fates.popleft().message if refuse else ""
            if refuse:
                return 400, {}, _error_body("messages", 400, message)
            if len({cid for cid, _ in lines}) != len(lines):
                return 400, {}, _error_body("messages", 400, "duplicate custom_id in the batch")
            batch = self._new_batch("anthropic", lines)
            return 200, {}, _dumps(self._anthropic_batch(batch))
        batch = self.batches.get(ident or "")
        if batch is None:
            return not_found
        if name in ("batch_cancel", "message_batch_cancel"):
            with self._lock:
                batch.cancel = True
        elif name in ("batch", "message_batch"):
            self._advance(batch)
        if name == "message_batch_results":
            if not batch.ended:
                return 400, {}, _error_body("messages", 400, "the batch is still processing")
            return 200, {"Content-Type": "application/binary"}, _anthropic_results(batch)
        if batch.kind == "openai":
            return 200, {}, _dumps(self._openai_batch(batch))
        return 200, {}, _dumps(self._anthropic_batch(batch))


def _running_status(batch: _Batch) -> str:
    """validating, in_progress or finalizing: what a batch that has not ended shows."""
    if batch.cancel:
        return "cancelling"
    end = batch.polls_to_end
    if batch.polls <= 1 and (end is None or end > 3):
        return "validating"
    if end is not None and batch.polls == end - 1 and end > 2:
        return "finalizing"
    return "in_progress"


def _anthropic_results(batch: _Batch) -> bytes:
    out = []
    for result in batch.results:
        if result["status"] is None:
            item = {"type": "expired" if batch.fate.status == "expired" else "canceled"}
        elif result["status"] == 200:
            item = {"type": "succeeded", "message": result["body"]}
        else:
            item = {"type": "errored", "error": result["body"]}
        out.append(json.dumps({"custom_id": result["custom_id"], "result": item}) + "\n")
    return "".join(out).encode("utf-8")


def _file_object(file_id: str, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": len(content),
        "created_at": int(time.time()),
        "filename": filename,
        "purpose": purpose,
        "status": "processed",
        "status_details": None,
        "expires_at": None,
        "content": content,
    }


def _rfc3339(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """name -> (filename, bytes) of a multipart/form-data body."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    fields: dict[str, tuple[str | None, bytes]] = {}
    if not message.is_multipart():
        return fields
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = (part.get_filename(), payload)
    return fields


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
                if not any(k.lower() == "content-type" for k in headers):
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

        def _read_body(self) -> bytes:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                chunks = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _batch(self, method: str, raw: bytes) -> bool:
            """Answer a request of the batch protocols; False when it is none."""
            found = batch_route_of(method, self.path)
            if found is None:
                return False
            name, ident = found
            headers = _headers(self.headers)
            if name == "files":  # the upload itself is not kept in the record: only its size
                body: Any = {"multipart_bytes": len(raw)}
            else:
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
            server._record(RecordedRequest(method, self.path, headers, body))
            status, extra, payload = server.answer_batch_route(name, ident, headers, raw)
            self._send(status, extra, payload)
            return True

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            if self._batch("GET", b""):
                return
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
            raw = self._read_body()
            if self._batch("POST", raw):
                return
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
    "BATCH_ROUTES",
    "ROUTES",
    "VALID_PLAN",
    "BatchFate",
    "FakeServer",
    "RecordedRequest",
    "Reply",
    "anthropic_message",
    "batch_route_of",
    "chat_completion",
    "fake_vllm_main",
    "main",
    "route_of",
]


if __name__ == "__main__":
    sys.exit(main())
