"""The hosted image APIs' batch protocols, for tests (stdlib only).

:class:`ImageBatchServer` is an :class:`~omnistory_testkit.image_servers.ImageServer` (the
synchronous routes stay as they are) that also speaks, in the wire formats the SDKs parse:

* the **Gemini Batch API** (google-genai's ``client.batches``): ``POST .../models/{model}:
  batchGenerateContent`` with ``{"batch": {"displayName", "inputConfig": {"requests":
  {"requests": [{"request", "metadata"}]}}}}`` answers the batch as a long-running operation
  (``{"name": "batches/...", "metadata": {"state": "BATCH_STATE_PENDING", ...}, "done"}``);
  ``GET .../batches/{id}`` polls it (PENDING -> RUNNING -> SUCCEEDED, or FAILED / EXPIRED); an
  ended batch's ``metadata.output.inlinedResponses.inlinedResponses`` holds one ``{"response"}``
  (a ``generateContent`` answer) or ``{"error": {"code", "message"}}`` (a gRPC code) per request,
  with the request's ``metadata``;
* **OpenAI Files + Batches on the Images endpoints**: ``POST /v1/files`` (multipart, purpose
  ``batch``), ``POST /v1/batches`` (endpoint ``/v1/images/generations`` or ``/v1/images/edits``;
  every line's ``url`` must be the batch's endpoint), ``GET /v1/batches/{id}`` (validating ->
  in_progress -> completed, or failed / expired), ``GET /v1/files/{id}/content``; the output
  file holds the lines answered 200, the error file the others.  An edit line must be the JSON
  form of an edit (``images: [{"image_url"} | {"file_id"}]``), else it is answered 400.

Each line is answered, when its batch ends, by the synchronous route's own logic (the route's
next scripted :class:`~omnistory_testkit.image_servers.ImageReply`, else an image), in the order
of the lines, so a scripted error makes that line an errored result.  Batch lines are not
requests of the synchronous routes (``requests_for("gemini")`` counts only synchronous calls).
A batch ends on its ``batch_polls``-th poll; :meth:`ImageBatchServer.script_batch` decides the
fate of the next batches (:class:`~omnistory_testkit.servers.BatchFate`: ``completed``,
``pending`` until :meth:`ImageBatchServer.end_batches`, ``failed``, ``expired`` after some
lines).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from omnistory_testkit.image_servers import ImageRequest, ImageServer, _multipart
from omnistory_testkit.servers import BatchFate

#: (method, path pattern, route name) of the batch protocols (any prefix before the pattern)
BATCH_ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (method, re.compile(pattern), name)
    for method, pattern, name in (
        ("POST", r"/models/(?P<id>[^/:]+):batchGenerateContent$", "gemini_batches"),
        ("GET", r"/batches/(?P<id>gbatch[^/?]+)$", "gemini_batch"),
        ("POST", r"/files$", "files"),
        ("GET", r"/files/(?P<id>[^/?]+)/content$", "file_content"),
        ("POST", r"/batches$", "batches"),
        ("GET", r"/batches/(?P<id>batch_[^/?]+)$", "batch"),
    )
)
#: gRPC codes of the HTTP statuses a scripted reply may have (a batch answer's error is a
#: google.rpc.Status)
GRPC_CODES = {400: 3, 403: 7, 404: 5, 429: 8, 500: 13, 503: 14, 504: 4}
GENERATIONS = "/v1/images/generations"
EDITS = "/v1/images/edits"


def batch_route_of(method: str, path: str) -> tuple[str, str | None] | None:
    """The batch route of a request and the id (or model) in its path, or None."""
    bare = path.split("?", 1)[0]
    for route_method, pattern, name in BATCH_ROUTES:
        match = pattern.search(bare) if method == route_method else None
        if match:
            return name, match.groupdict().get("id")
    return None


@dataclass
class BatchRequest(ImageRequest):
    """A request of a batch protocol (its ``route`` is the batch route's name)."""

    @property
    def route(self) -> str | None:
        found = batch_route_of(self.method, self.path)
        return found[0] if found else None


@dataclass
class Job:
    """One batch the server holds: its lines ``(key, request)``, fate and answers."""

    id: str
    kind: str  # "gemini" | "openai"
    target: str  # the model (gemini) or the endpoint (openai)
    lines: list[tuple[str, Any]]
    fate: BatchFate
    polls_to_end: int | None
    created: float = field(default_factory=time.time)
    input_file_id: str | None = None
    polls: int = 0
    ended: bool = False
    #: per answered line: (key, HTTP status, answer body)
    results: list[tuple[str, int, Any]] = field(default_factory=list)
    output_file_id: str | None = None
    error_file_id: str | None = None


class ImageBatchServer(ImageServer):
    """An :class:`ImageServer` that also speaks the batch protocols (see the module doc);
    ``batch_polls``: a batch ends on this poll (1: the first)."""

    def __init__(self, *, batch_polls: int = 1, **kwargs: Any) -> None:
        self.batch_polls = batch_polls
        self.jobs: dict[str, Job] = {}
        self.files: dict[str, dict[str, Any]] = {}
        self._fates: deque[BatchFate] = deque()
        self._ids = itertools.count(1)
        super().__init__(**kwargs)

    # -- control -----------------------------------------------------------------------------
    def script_batch(self, *fates: BatchFate) -> None:
        """The fates of the next batches created, in order (none queued: completed)."""
        with self._lock:
            self._fates.extend(fates)

    def end_batches(self) -> None:
        """Every batch still running ends on its next poll (``pending`` ones complete)."""
        with self._lock:
            for job in self.jobs.values():
                if not job.ended:
                    if job.fate.status == "pending":
                        job.fate = BatchFate("completed")
                    job.polls_to_end = job.polls + 1

    def batch_creations(self) -> int:
        return len(self.requests_for("gemini_batches")) + len(self.requests_for("batches"))

    def batch_lines(self, kind: str | None = None) -> list[tuple[str, Any]]:
        """``(key, request)`` of every batch line created, in order of creation and lines."""
        with self._lock:
            jobs = [j for j in self.jobs.values() if kind in (None, j.kind)]
            return [line for job in jobs for line in job.lines]

    # -- HTTP --------------------------------------------------------------------------------
    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        base: Any = super().handler_class()
        server = self

        class Handler(base):
            def _batch(self, method: str) -> bool:
                found = batch_route_of(method, self.path)
                if found is None:
                    return False
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {str(k).lower(): str(v) for k, v in self.headers.items()}
                request = BatchRequest(method, self.path, headers)
                if found[0] == "files":
                    request.body = {"multipart_bytes": len(raw)}
                elif raw:
                    request.body = json.loads(raw)
                with server._lock:
                    server.recorded.append(request)
                self._send(*server.answer_batch(found[0], found[1], headers, raw))
                return True

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                if not self._batch("POST"):
                    super().do_POST()

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                if not self._batch("GET"):
                    self._send(404, {}, b'{"error": {"message": "no such route"}}')

        return Handler

    def answer_batch(
        self, name: str, ident: str | None, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if name == "files":
            fields, files = _multipart(headers.get("content-type", ""), raw)
            if not files:
                return 400, {}, _error(400, "no file in the upload")
            file_id = self._new_id("file-")
            obj = _file(file_id, files[0][3], files[0][1], fields.get("purpose", ""))
            with self._lock:
                self.files[file_id] = obj
            return 200, {}, _dumps({k: v for k, v in obj.items() if k != "content"})
        if name == "file_content":
            obj = self.files.get(ident or "")
            if obj is None:
                return 404, {}, _error(404, f"no such file: {ident}")
            return 200, {"Content-Type": "application/octet-stream"}, obj["content"]
        body = json.loads(raw) if raw else {}
        if name == "gemini_batches":
            return self._create_gemini(str(ident), body)
        if name == "batches":
            return self._create_openai(body)
        job = self.jobs.get(f"batches/{ident}" if name == "gemini_batch" else str(ident))
        if job is None:
            status = 404
            message = f"no such batch: {ident}"
            google = {"error": {"code": 404, "message": message, "status": "NOT_FOUND"}}
            return status, {}, _dumps(google) if name == "gemini_batch" else _error(404, message)
        self._advance(job)
        return 200, {}, _dumps(self._gemini_job(job) if job.kind == "gemini" else self._batch(job))

    # -- creation ----------------------------------------------------------------------------
    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    def _new_job(self, kind: str, target: str, lines: list[tuple[str, Any]], **extra: Any) -> Job:
        with self._lock:
            fate = self._fates.popleft() if self._fates else BatchFate()
            prefix = "batches/gbatch" if kind == "gemini" else "batch_"
            job = Job(
                self._new_id(prefix),
                kind,
                target,
                lines,
                fate,
                None if fate.status == "pending" else (fate.polls or self.batch_polls),
                **extra,
            )
            self.jobs[job.id] = job
        return job

    def _create_gemini(self, model: str, body: Any) -> tuple[int, dict[str, str], bytes]:
        config = (body.get("batch") or {}).get("inputConfig") or {}
        requests = (config.get("requests") or {}).get("requests")
        if not isinstance(requests, list) or not requests:
            message = "batch.inputConfig.requests.requests must list the requests"
            return 400, {}, _dumps({"error": {"code": 400, "message": message}})
        lines = [(str((r.get("metadata") or {}).get("key", n)), r) for n, r in enumerate(requests)]
        job = self._new_job("gemini", model, lines)
        if job.fate.status == "failed":
            self._finish(job)
        return 200, {}, _dumps(self._gemini_job(job))

    def _create_openai(self, body: Any) -> tuple[int, dict[str, str], bytes]:
        file = self.files.get(str(body.get("input_file_id")))
        endpoint = str(body.get("endpoint"))
        if file is None or endpoint not in (GENERATIONS, EDITS):
            return 400, {}, _error(400, "input_file_id or endpoint is not valid")
        lines = []
        for text in file["content"].decode("utf-8").splitlines():
            line = json.loads(text)
            if line.get("url") != endpoint or line.get("method") != "POST":
                return 400, {}, _error(400, f"a line's url is not the endpoint {endpoint}")
            lines.append((str(line["custom_id"]), line.get("body")))
        if len({key for key, _ in lines}) != len(lines):
            return 400, {}, _error(400, "duplicate custom_id in the batch")
        job = self._new_job("openai", endpoint, lines, input_file_id=file["id"])
        if job.fate.status == "failed":
            self._finish(job)
        return 200, {}, _dumps(self._batch(job))

    # -- ending ------------------------------------------------------------------------------
    def _advance(self, job: Job) -> None:
        with self._lock:
            if job.ended:
                return
            job.polls += 1
            ending = job.polls_to_end is not None and job.polls >= job.polls_to_end
        if ending:
            self._finish(job)

    def _finish(self, job: Job) -> None:
        status = job.fate.status
        answered = len(job.lines) if status == "completed" else job.fate.answered
        results = []
        for key, request in job.lines[: 0 if status == "failed" else answered]:
            results.append((key, *self._answer_line(job, request)))
        with self._lock:
            job.results, job.ended = results, True
        if job.kind == "openai" and status != "failed":
            self._write_files(job)

    def _answer_line(self, job: Job, request: Any) -> tuple[int, Any]:
        """A line's (status, body), from the synchronous route's logic."""
        if job.kind == "gemini":
            inner = request.get("request") or {}
            path = f"/v1beta/models/{job.target}:generateContent"
        else:
            inner = request if isinstance(request, dict) else {}
            path = job.target
            images = inner.get("images")
            if job.target == EDITS and not (
                isinstance(images, list)
                and images
                and all(
                    isinstance(i, dict) and ("image_url" in i or "file_id" in i) for i in images
                )
            ):
                detail = {"message": "images: a list of {image_url} or {file_id} is required"}
                return 400, {"error": {**detail, "type": "invalid_request_error", "code": None}}
        raw = json.dumps(inner, sort_keys=True).encode("utf-8")
        status, _, payload = self.answer(ImageRequest("POST", path, {}, body=inner), raw)
        return status, json.loads(payload)

    def _write_files(self, job: Job) -> None:
        ok, errors = [], []
        for n, (key, status, body) in enumerate(job.results):
            response = {"status_code": status, "request_id": f"req_{job.id}_{n}", "body": body}
            line = {"id": f"batch_req_{n}", "custom_id": key, "response": response, "error": None}
            (ok if status == 200 else errors).append(line)
        for key, _ in job.lines[len(job.results) :]:  # never executed: the batch expired
            error = {"code": "batch_expired", "message": "not executed before the window ended"}
            errors.append({"id": "batch_req", "custom_id": key, "response": None, "error": error})
        for lines, attr in ((ok, "output_file_id"), (errors, "error_file_id")):
            if lines:
                content = "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")
                file_id = self._new_id("file-")
                self.files[file_id] = _file(file_id, content, f"{attr}.jsonl", "batch_output")
                setattr(job, attr, file_id)

    # -- the batch objects -------------------------------------------------------------------
    def _gemini_job(self, job: Job) -> dict[str, Any]:
        state = job.fate.status if job.ended else ("running" if job.polls else "pending")
        names = {"completed": "SUCCEEDED", "failed": "FAILED", "expired": "EXPIRED"}
        metadata: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "name": job.id,
            "model": f"models/{job.target}",
            "displayName": "omnistory",
            "state": f"BATCH_STATE_{names.get(state, state.upper())}",
            "createTime": _rfc3339(job.created),
            "updateTime": _rfc3339(time.time()),
            "batchStats": {"requestCount": str(len(job.lines))},
        }
        operation: dict[str, Any] = {"name": job.id, "metadata": metadata, "done": job.ended}
        if job.ended and state != "failed":
            answers = []
            for (key, status, body), (_, request) in zip(job.results, job.lines, strict=False):
                answer: dict[str, Any] = {"metadata": request.get("metadata") or {"key": key}}
                if status == 200:
                    answer["response"] = body
                else:
                    message = (body.get("error") or {}).get("message", "")
                    answer["error"] = {"code": GRPC_CODES.get(status, 2), "message": message}
                answers.append(answer)
            metadata["output"] = {"inlinedResponses": {"inlinedResponses": answers}}
        if state == "failed":
            operation["error"] = {"code": 3, "message": job.fate.message}
        return operation

    def _batch(self, job: Job) -> dict[str, Any]:
        status = job.fate.status if job.ended else ("in_progress" if job.polls else "validating")
        done = sum(1 for _, code, _ in job.results if code == 200)
        body: dict[str, Any] = {
            "id": job.id,
            "object": "batch",
            "endpoint": job.target,
            "input_file_id": job.input_file_id,
            "completion_window": "24h",
            "status": status,
            "output_file_id": job.output_file_id,
            "error_file_id": job.error_file_id,
            "created_at": int(job.created),
            "request_counts": {
                "total": len(job.lines),
                "completed": done,
                "failed": len(job.lines) - done if job.ended else 0,
            },
            "metadata": {},
            "errors": None,
        }
        if status == "failed":
            error = {"code": "invalid_request", "message": job.fate.message, "line": None}
            body["errors"] = {"object": "list", "data": [error]}
        return body


def _file(file_id: str, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": len(content),
        "created_at": int(time.time()),
        "filename": filename,
        "purpose": purpose,
        "status": "processed",
        "content": content,
    }


def _rfc3339(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def _dumps(payload: Any) -> bytes:
    return json.dumps(payload).encode("utf-8")


def _error(status: int, message: str) -> bytes:
    return _dumps({"error": {"message": message, "type": "invalid_request_error", "code": None}})


__all__ = ["BATCH_ROUTES", "BatchRequest", "ImageBatchServer", "Job", "batch_route_of"]
