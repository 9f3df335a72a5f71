"""Provider batch APIs: OpenAI's Batch API and Anthropic's Message Batches, at half the price.

With ``batch=true`` a hosted planner (``planner=gpt``, ``planner=claude``) or a judge behind the
``openai`` backend sends the calls of its stage as provider batches instead of one request each.
The request bodies are the synchronous ones (every batch parameter is runtime, so the cache keys
do not change); the provider bills them at :data:`BATCH_DISCOUNT` of the standard price and
answers within its 24-hour window.

* **OpenAI** (:class:`OpenAIBatches`): one JSONL file per batch (``files.create``, purpose
  ``batch``), ``batches.create`` with endpoint ``/v1/chat/completions``; ``batches.retrieve``
  polls; the answers are the lines of ``output_file_id`` and ``error_file_id``
  (``files.content``).  At most 50,000 requests and 200 MB per file.
* **Anthropic** (:class:`AnthropicBatches`): ``messages.batches.create`` with the requests inline,
  ``messages.batches.retrieve`` polls, ``messages.batches.results`` streams the JSONL behind
  ``results_url``.  At most 100,000 requests and 256 MB per batch.
* Hosted image experts (:mod:`omnistory_core.kit.image_batches`) use the same loop and ledger:
  ``gpt_image`` with OpenAI's Batch API on the Images endpoints, ``nanobanana`` with the Gemini
  Batch API (its protocol lives in omnistory-gemini-image; 20 MB of inline requests per batch).

A stage's requests beyond those limits (or ``batch_max_requests`` / ``batch_max_bytes``) go in
several batches.

**The ledger** (:class:`BatchLedger`) makes batches survive the process: every request has a
deterministic ``custom_id``, the sha256 of its body (:func:`custom_id`; 64 characters of
``[0-9a-f]``, within both providers' rules), and right after a batch is created one small JSON file
per request, ``<store>/batches/<kind>-<name>/<custom_id[:2]>/<custom_id>.json``, names its batch
(written atomically).  A re-run, after the process was killed while polling or after
``batch_wait_s`` ran out, finds those files, polls the batches they name and submits only the
requests that have none.  An entry goes once its result has come back, or once its request has
been handed to the synchronous path.  Entries record the API's base URL (without credentials):
an entry made against another server is ignored, not polled there.

**Fallback**: a request whose batch result is errored, expired, canceled or missing, every
request of a batch that failed validation or that the provider no longer knows (HTTP 404), a
request too big for any batch, and the requests of a batch that could not be submitted go through
the component's synchronous path, one by one with its usual retries; the other requests keep their
batch results.  Polls, uploads and downloads follow the component's retry policy too
(:func:`retrying`).  A poll that still fails leaves the ledger as it is: those items fail with
the transient ``model_error`` and the next run polls again.

:func:`run_batches` is the loop; :class:`~omnistory_core.kit.planning.base.VLMPlanner` and the
judges'
:class:`~omnistory_eval.judges.backends.openai_compat.OpenAICompatibleBackend` call it.
Nothing here imports an SDK at module level (the OpenAI reply type is imported when a result is
read).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from omnistory_core.contract import BATCH_PENDING
from omnistory_core.engine.store import atomic_write_bytes
from omnistory_core.kit.retry import ErrorInfo, RetryPolicy, call_with_retries
from omnistory_core.params import Param

log = logging.getLogger("omnistory")

#: what a batch call costs, as a share of the standard price (both providers)
BATCH_DISCOUNT = 0.5
#: a component's ``batch_size`` in batch mode: large, so that the engine hands it every pending
#: item of the stage in one ``run_batch`` call (one provider batch, not one per engine chunk)
BATCH_MODE_BATCH_SIZE = 1_000_000
#: the failure category of an item whose batch had not ended when ``batch_wait_s`` ran out;
#: ``engine.retry_failures=errors`` recomputes it (the next run polls the stored batch)
LEDGER_VERSION = 1


@dataclass(frozen=True)
class BatchLimits:
    """The most requests and bytes (of the JSONL input) the provider takes in one batch."""

    max_requests: int
    max_bytes: int


#: OpenAI: 50,000 requests and 200 MB per input file (decimal megabytes: the safe reading)
OPENAI_LIMITS = BatchLimits(max_requests=50_000, max_bytes=200 * 1000 * 1000)
#: Anthropic: 100,000 requests and 256 MB per Message Batch
ANTHROPIC_LIMITS = BatchLimits(max_requests=100_000, max_bytes=256 * 1000 * 1000)
#: Gemini Batch API with inline requests (the hosted image expert nanobanana): 20 MB of requests
#: per batch; no request count is stated for inline batches, so OpenAI's is kept as a cap
GEMINI_LIMITS = BatchLimits(max_requests=50_000, max_bytes=20 * 1000 * 1000)
PROVIDER_LIMITS: dict[str, BatchLimits] = {
    "openai": OPENAI_LIMITS,
    "anthropic": ANTHROPIC_LIMITS,
    "gemini": GEMINI_LIMITS,
}
#: the name of each provider's batch API, for parameter docs and messages
PROVIDER_APIS: dict[str, str] = {
    "openai": "OpenAI Batch API",
    "anthropic": "Anthropic Message Batches",
    "gemini": "Gemini Batch API",
}


def batch_parameters(provider: str, doc_prefix: str = "") -> tuple[Param, ...]:
    """The batch parameters of a component on ``provider``'s batch API (all runtime: a batch
    request is the synchronous request, so the cache key is the same)."""
    limits = PROVIDER_LIMITS[provider]
    api = PROVIDER_APIS[provider]
    p = doc_prefix
    return (
        Param(
            "batch",
            bool,
            False,
            f"{p}send the stage's calls through the {api} (half price, answered within 24 h); a"
            " re-run polls the batches it submitted",
            runtime=True,
        ),
        Param(
            "batch_poll_s", float, 30.0, f"{p}seconds between polls of a batch", runtime=True, gt=0
        ),
        Param(
            "batch_wait_s",
            (float, None),
            None,
            f"{p}null: wait until the batches end; N: stop waiting after N s (the items become"
            f" {BATCH_PENDING} failures; the next run collects them)",
            runtime=True,
            ge=0,
        ),
        Param(
            "batch_max_requests",
            int,
            limits.max_requests,
            f"{p}requests per batch at most (more go in further batches)",
            runtime=True,
            ge=1,
            le=limits.max_requests,
        ),
        Param(
            "batch_max_bytes",
            int,
            limits.max_bytes,
            f"{p}bytes of requests per batch at most (more go in further batches)",
            runtime=True,
            ge=1,
            le=limits.max_bytes,
        ),
    )


BATCH_PARAM_NAMES: tuple[str, ...] = tuple(p.name for p in batch_parameters("openai"))


@dataclass(frozen=True)
class BatchSettings:
    """How one component polls and splits its batches (from its ``batch_*`` parameters)."""

    poll_s: float = 30.0
    wait_s: float | None = None
    max_requests: int = OPENAI_LIMITS.max_requests
    max_bytes: int = OPENAI_LIMITS.max_bytes

    @classmethod
    def from_params(cls, params: Mapping[str, Any], limits: BatchLimits) -> BatchSettings:
        wait = params.get("batch_wait_s")
        return cls(
            poll_s=float(params.get("batch_poll_s") or 30.0),
            wait_s=None if wait is None else float(wait),
            max_requests=min(int(params.get("batch_max_requests") or 1), limits.max_requests),
            max_bytes=min(int(params.get("batch_max_bytes") or 1), limits.max_bytes),
        )


def custom_id(body: Mapping[str, Any]) -> str:
    """The request's id in a batch: the sha256 hex of its body as canonical JSON (the same request
    gets the same id in every run, which is what lets a re-run find its batch)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def public_url(url: Any) -> str:
    """``url`` without user information (a proxy URL may carry credentials)."""
    text = str(url or "")
    parts = urlsplit(text)
    if "@" in parts.netloc:
        parts = parts._replace(netloc=parts.netloc.rsplit("@", 1)[1])
    return urlunsplit(parts).rstrip("/")


# -- the ledger ---------------------------------------------------------------------------------
class BatchLedger:
    """Which batch each submitted request is in: one JSON file per request under
    ``<root>/batches/<owner>/`` (``root`` None: kept in memory only, nothing survives the
    process).  Written by the process holding the requests' store locks, so two processes never
    write one entry at once."""

    def __init__(self, root: Path | str | None, owner: str, *, provider: str, endpoint: str):
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", owner)
        self.directory = None if root is None else Path(root) / "batches" / safe
        self.provider = provider
        self.endpoint = public_url(endpoint)
        self._memory: dict[str, dict[str, Any]] = {}

    def path(self, cid: str) -> Path:
        assert self.directory is not None
        return self.directory / cid[:2] / f"{cid}.json"

    def _read(self, cid: str) -> dict[str, Any] | None:
        if self.directory is None:
            return self._memory.get(cid)
        try:
            data = json.loads(self.path(cid).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # none, or unreadable: the request is submitted again
            return None
        return data if isinstance(data, dict) else None

    def get(self, cid: str) -> str | None:
        """The batch id of request ``cid`` on this provider and server, or None."""
        entry = self._read(cid)
        if not entry or entry.get("provider") != self.provider:
            return None
        if entry.get("endpoint") != self.endpoint or not entry.get("batch_id"):
            return None
        return str(entry["batch_id"])

    def put(self, cids: Iterable[str], batch_id: str) -> None:
        when = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for cid in cids:
            entry = {
                "version": LEDGER_VERSION,
                "custom_id": cid,
                "batch_id": batch_id,
                "provider": self.provider,
                "endpoint": self.endpoint,
                "submitted_at": when,
            }
            if self.directory is None:
                self._memory[cid] = entry
            else:
                data = (json.dumps(entry, sort_keys=True) + "\n").encode("utf-8")
                atomic_write_bytes(self.path(cid), data)

    def remove(self, cids: Iterable[str]) -> None:
        for cid in cids:
            if self.directory is None:
                self._memory.pop(cid, None)
                continue
            path = self.path(cid)
            path.unlink(missing_ok=True)
            try:
                path.parent.rmdir()  # only when empty; the ledger stays easy to inspect
            except OSError:
                pass

    def entries(self) -> list[dict[str, Any]]:
        """Every entry (all providers and servers), for inspection and tests."""
        if self.directory is None:
            return list(self._memory.values())
        out = []
        for path in sorted(self.directory.glob("*/*.json")):
            try:
                out.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
        return out


# -- calls with the component's retries -----------------------------------------------------------
class BatchCallError(Exception):
    """A batch API call that failed after its retries (message scrubbed of the key)."""

    def __init__(self, message: str, *, status: int | None = None, category: str = "model_error"):
        super().__init__(message)
        self.status = status
        self.category = category


#: how a provider's batch API sends one request: with retries (:func:`retrying`) or as is
Call = Callable[[Callable[[], Any]], Any]


def retrying(
    classify: Callable[[BaseException], ErrorInfo],
    policy: RetryPolicy,
    *,
    scrub: Callable[[str], str] = lambda text: text,
    sleep: Callable[[float], None] = time.sleep,
) -> Call:
    """``call(fn)``: ``fn()`` under ``policy``; raises :class:`BatchCallError` once it gives up."""

    def call(fn: Callable[[], Any]) -> Any:
        outcome = call_with_retries(fn, classify, policy, sleep=sleep)
        if outcome.error is not None:
            error = outcome.error
            raise BatchCallError(scrub(error.message), status=error.status, category=error.category)
        return outcome.value

    return call


# -- the providers ----------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchState:
    """A batch as one poll saw it: ``ended`` (results can be read), ``failed`` (ended with no
    results: validation failed), ``status`` (the provider's word) and a progress line."""

    status: str
    ended: bool = False
    failed: bool = False
    progress: str = ""
    message: str = ""
    #: the SDK's batch object of this poll
    raw: Any = None


@dataclass(frozen=True)
class ItemResult:
    """One request's answer in an ended batch: the SDK's reply object, or why there is none."""

    response: Any = None
    error: str | None = None


class BatchAPI:
    """One provider's batch protocol over its SDK client (subclasses: the two providers)."""

    provider: ClassVar[str]
    limits: ClassVar[BatchLimits]

    def line(self, cid: str, body: Mapping[str, Any]) -> bytes:
        """Request ``cid`` as the provider counts it against the byte limit."""
        raise NotImplementedError

    def submit(self, client: Any, lines: list[bytes], call: Call) -> str:
        """Create one batch of ``lines``; its id."""
        raise NotImplementedError

    def poll(self, client: Any, batch_id: str, call: Call) -> BatchState:
        raise NotImplementedError

    def results(
        self, client: Any, batch_id: str, state: BatchState, call: Call
    ) -> dict[str, ItemResult]:
        """custom_id -> answer, for a batch that ``state`` (its last poll) says has ended."""
        raise NotImplementedError


def _jsonl(payload: Mapping[str, Any]) -> bytes:
    return (json.dumps(payload, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class OpenAIBatches(BatchAPI):
    """OpenAI's Batch API for Chat Completions requests."""

    provider = "openai"
    limits = OPENAI_LIMITS
    endpoint = "/v1/chat/completions"
    #: ended; the output and error files hold what was answered before the end
    ENDED = frozenset({"completed", "expired", "cancelled"})
    RUNNING = frozenset({"validating", "in_progress", "finalizing", "cancelling"})

    def line(self, cid: str, body: Mapping[str, Any]) -> bytes:
        return _jsonl({"custom_id": cid, "method": "POST", "url": self.endpoint, "body": body})

    def submit(self, client: Any, lines: list[bytes], call: Call) -> str:
        # the file goes from disk, not from one more copy of every image in memory
        with tempfile.TemporaryFile(prefix="omnistory-batch-", suffix=".jsonl") as fh:
            for line in lines:
                fh.write(line)

            def upload() -> Any:
                fh.seek(0)
                return client.files.create(
                    file=("omnistory-batch.jsonl", fh, "application/jsonl"), purpose="batch"
                )

            uploaded = call(upload)
        batch = call(
            lambda: client.batches.create(
                input_file_id=uploaded.id,
                endpoint=self.endpoint,
                completion_window="24h",
                metadata={"created_by": "omnistory"},
            )
        )
        return str(batch.id)

    def poll(self, client: Any, batch_id: str, call: Call) -> BatchState:
        batch = call(lambda: client.batches.retrieve(batch_id))
        status = str(batch.status)
        counts = getattr(batch, "request_counts", None)
        progress = (
            f"{counts.completed} completed, {counts.failed} failed of {counts.total}"
            if counts is not None
            else ""
        )
        if status == "failed":
            errors = getattr(getattr(batch, "errors", None), "data", None) or []
            message = "; ".join(
                f"{getattr(e, 'code', None) or 'error'}: {getattr(e, 'message', '')}"
                for e in errors[:3]
            )
            return BatchState(
                status, ended=True, failed=True, progress=progress, message=message, raw=batch
            )
        # a status this code does not know is treated as still running: polling is harmless
        return BatchState(status, ended=status in self.ENDED, progress=progress, raw=batch)

    def results(
        self, client: Any, batch_id: str, state: BatchState, call: Call
    ) -> dict[str, ItemResult]:
        from openai.types.chat import ChatCompletion

        batch = state.raw
        out: dict[str, ItemResult] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            try:
                text = call(lambda file_id=file_id: client.files.content(file_id).text)
            except BatchCallError:
                if file_id == batch.output_file_id:
                    raise
                # the error file only says why requests failed; they go synchronously anyway
                continue
            for raw in str(text).splitlines():
                if not raw.strip():
                    continue
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue  # a damaged line: its request is missing, so it is sent again
                cid = line.get("custom_id")
                if not isinstance(cid, str):
                    continue
                response = line.get("response") or {}
                status = response.get("status_code")
                body = response.get("body")
                if status == 200 and isinstance(body, dict) and not line.get("error"):
                    # construct (not validate), as the SDK reads its own responses
                    out[cid] = ItemResult(response=ChatCompletion.construct(**body))
                else:
                    out[cid] = ItemResult(error=_openai_line_error(line, status, body))
        return out


def _openai_line_error(line: Mapping[str, Any], status: Any, body: Any) -> str:
    error = line.get("error")
    if isinstance(error, dict):
        return f"{error.get('code') or 'error'}: {error.get('message') or ''}".strip()
    detail = body.get("error") if isinstance(body, dict) else None
    message = detail.get("message") if isinstance(detail, dict) else None
    return f"HTTP {status}: {message or 'no answer'}"


class AnthropicBatches(BatchAPI):
    """Anthropic's Message Batches."""

    provider = "anthropic"
    limits = ANTHROPIC_LIMITS

    def line(self, cid: str, body: Mapping[str, Any]) -> bytes:
        return _jsonl({"custom_id": cid, "params": body})

    def submit(self, client: Any, lines: list[bytes], call: Call) -> str:
        requests = [json.loads(line) for line in lines]
        batch = call(lambda: client.messages.batches.create(requests=requests))
        return str(batch.id)

    def poll(self, client: Any, batch_id: str, call: Call) -> BatchState:
        batch = call(lambda: client.messages.batches.retrieve(batch_id))
        status = str(batch.processing_status)
        c = batch.request_counts
        progress = (
            f"{c.processing} processing, {c.succeeded} succeeded, {c.errored} errored,"
            f" {c.expired} expired, {c.canceled} canceled"
        )
        return BatchState(status, ended=status == "ended", progress=progress, raw=batch)

    def results(
        self, client: Any, batch_id: str, state: BatchState, call: Call
    ) -> dict[str, ItemResult]:
        def read() -> dict[str, ItemResult]:
            out: dict[str, ItemResult] = {}
            for entry in client.messages.batches.results(batch_id):
                result = entry.result
                kind = getattr(result, "type", None)
                if kind == "succeeded":
                    out[entry.custom_id] = ItemResult(response=result.message)
                elif kind == "errored":
                    error = getattr(getattr(result, "error", None), "error", None)
                    what = getattr(error, "type", None) or "error"
                    out[entry.custom_id] = ItemResult(
                        error=f"errored: {what}: {getattr(error, 'message', '')}"
                    )
                else:
                    out[entry.custom_id] = ItemResult(error=str(kind or "no result"))
            return out

        return call(read)


# -- the loop ---------------------------------------------------------------------------------
@dataclass
class BatchOutcome:
    """What became of one request: ``ok`` (``response`` is the SDK's reply object), ``fallback``
    (send it synchronously), ``pending`` (its batch had not ended when the wait ran out) or
    ``error`` (the batch could not be polled or read; ``category`` says how it failed)."""

    status: str
    batch_id: str | None = None
    response: Any = None
    reason: str = ""
    category: str = "model_error"


@dataclass
class _Chunk:
    ids: list[str] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    size: int = 0


def _chunks(
    api: BatchAPI,
    ids: list[str],
    body: Callable[[str], Mapping[str, Any]],
    settings: BatchSettings,
    outcomes: dict[str, BatchOutcome],
) -> Iterator[_Chunk]:
    """The batches to create, one at a time, so that at most one batch's bytes are in memory."""
    chunk = _Chunk()
    for cid in ids:
        try:
            line = api.line(cid, body(cid))
        except (OSError, ValueError) as exc:  # the synchronous path reports it properly
            outcomes[cid] = BatchOutcome("fallback", reason=f"not batched: {exc}")
            continue
        if len(line) > settings.max_bytes:
            outcomes[cid] = BatchOutcome(
                "fallback",
                reason=f"request of {len(line):,} bytes exceeds batch_max_bytes="
                f"{settings.max_bytes:,}",
            )
            continue
        if chunk.ids and (
            len(chunk.ids) >= settings.max_requests or chunk.size + len(line) > settings.max_bytes
        ):
            yield chunk
            chunk = _Chunk()
        chunk.ids.append(cid)
        chunk.lines.append(line)
        chunk.size += len(line)
    if chunk.ids:
        yield chunk


def run_batches(
    api: BatchAPI,
    client: Any,
    ids: Iterable[str],
    body: Callable[[str], Mapping[str, Any]],
    ledger: BatchLedger,
    settings: BatchSettings,
    *,
    call: Call,
    label: str,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, BatchOutcome]:
    """Every request ``ids`` names (``body(cid)`` builds it) through ``api``'s batches: poll the
    batches the ledger knows, submit the rest, wait (at most ``settings.wait_s``), read the
    results.  Returns one :class:`BatchOutcome` per distinct id; never raises for the provider's
    errors (they become outcomes).  ``label`` (``planner=gpt``) starts every log line."""
    wanted = list(dict.fromkeys(ids))
    outcomes: dict[str, BatchOutcome] = {}
    active: dict[str, list[str]] = {}
    fresh: list[str] = []
    for cid in wanted:
        batch_id = ledger.get(cid)
        if batch_id is None:
            fresh.append(cid)
        else:
            active.setdefault(batch_id, []).append(cid)
    if active:
        log.info(
            "%s: %d request(s) already in %d batch(es) submitted earlier: polling %s",
            label,
            sum(map(len, active.values())),
            len(active),
            ", ".join(sorted(active)),
        )
    for chunk in _chunks(api, fresh, body, settings, outcomes):
        try:
            batch_id = api.submit(client, chunk.lines, call)
        except BatchCallError as exc:
            log.warning(
                "%s: could not submit a batch of %d request(s) (%s): sending them one by one at"
                " the standard price",
                label,
                len(chunk.ids),
                exc,
            )
            for cid in chunk.ids:
                outcomes[cid] = BatchOutcome("fallback", reason=f"batch not submitted: {exc}")
            continue
        # at once: a process killed from here on leaves a re-run that polls, not resubmits
        ledger.put(chunk.ids, batch_id)
        active[batch_id] = list(chunk.ids)
        log.info(
            "%s: submitted batch %s (%d request(s), %s bytes)",
            label,
            batch_id,
            len(chunk.ids),
            f"{chunk.size:,}",
        )
        chunk.lines.clear()
    _wait(api, client, active, ledger, settings, outcomes, call, label, sleep, clock)
    fallbacks = [o for o in outcomes.values() if o.status == "fallback"]
    if fallbacks:
        log.warning(
            "%s: %d request(s) got no batch result and go one by one at the standard price"
            " (first: %s)",
            label,
            len(fallbacks),
            fallbacks[0].reason,
        )
    return outcomes


def _wait(
    api: BatchAPI,
    client: Any,
    active: dict[str, list[str]],
    ledger: BatchLedger,
    settings: BatchSettings,
    outcomes: dict[str, BatchOutcome],
    call: Call,
    label: str,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    deadline = None if settings.wait_s is None else clock() + settings.wait_s
    seen: dict[str, str] = {}

    def unreadable(batch_id: str, cids: list[str], exc: BatchCallError, what: str) -> None:
        if exc.status == 404:  # the provider does not know it (any more): send them again
            ledger.remove(cids)
            for cid in cids:
                outcomes[cid] = BatchOutcome(
                    "fallback", batch_id, reason=f"batch {batch_id} not found ({exc})"
                )
            return
        for cid in cids:  # the ledger keeps them: the next run polls again
            outcomes[cid] = BatchOutcome(
                "error",
                batch_id,
                reason=f"{what} batch {batch_id} failed: {exc}; the next run polls it again",
                category=exc.category,
            )

    while active:
        for batch_id in list(active):
            cids = active[batch_id]
            try:
                state = api.poll(client, batch_id, call)
            except BatchCallError as exc:
                del active[batch_id]
                unreadable(batch_id, cids, exc, "polling")
                continue
            if seen.get(batch_id) != state.status:
                seen[batch_id] = state.status
                log.info("%s: batch %s %s (%s)", label, batch_id, state.status, state.progress)
            if not state.ended:
                continue
            del active[batch_id]
            if state.failed:
                ledger.remove(cids)
                for cid in cids:
                    outcomes[cid] = BatchOutcome(
                        "fallback",
                        batch_id,
                        reason=f"batch {batch_id} {state.status}: {state.message or 'no detail'}",
                    )
                continue
            try:
                results = api.results(client, batch_id, state, call)
            except BatchCallError as exc:
                unreadable(batch_id, cids, exc, "reading the results of")
                continue
            for cid in cids:
                result = results.get(cid)
                if result is None:
                    reason = f"no result in batch {batch_id} ({state.status})"
                    outcomes[cid] = BatchOutcome("fallback", batch_id, reason=reason)
                elif result.error is not None:
                    reason = f"batch {batch_id}: {result.error}"
                    outcomes[cid] = BatchOutcome("fallback", batch_id, reason=reason)
                else:
                    outcomes[cid] = BatchOutcome("ok", batch_id, response=result.response)
            ledger.remove(cids)
        if not active:
            return
        now = clock()
        if deadline is not None and now >= deadline:
            for batch_id, cids in active.items():
                for cid in cids:
                    outcomes[cid] = BatchOutcome(
                        "pending",
                        batch_id,
                        reason=f"batch {batch_id} had not ended after batch_wait_s="
                        f"{settings.wait_s:g} s ({seen.get(batch_id, 'not polled')}); the next"
                        " run polls it",
                    )
            log.info(
                "%s: stopped waiting for %d batch(es) (batch_wait_s=%g); the next run collects"
                " them",
                label,
                len(active),
                settings.wait_s,
            )
            return
        wait = settings.poll_s if deadline is None else min(settings.poll_s, deadline - now)
        sleep(max(0.0, wait))


__all__ = [
    "ANTHROPIC_LIMITS",
    "BATCH_DISCOUNT",
    "BATCH_MODE_BATCH_SIZE",
    "BATCH_PARAM_NAMES",
    "BATCH_PENDING",
    "GEMINI_LIMITS",
    "OPENAI_LIMITS",
    "PROVIDER_APIS",
    "PROVIDER_LIMITS",
    "AnthropicBatches",
    "BatchAPI",
    "BatchCallError",
    "BatchLedger",
    "BatchLimits",
    "BatchOutcome",
    "BatchSettings",
    "BatchState",
    "Call",
    "ItemResult",
    "OpenAIBatches",
    "batch_parameters",
    "custom_id",
    "public_url",
    "retrying",
    "run_batches",
]
