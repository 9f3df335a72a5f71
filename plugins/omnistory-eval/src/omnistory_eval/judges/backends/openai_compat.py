"""Judging through any OpenAI-compatible chat-completions server (``vllm serve``, hosted APIs).

Parameters (from the judge's config; declared with types and defaults in
:data:`omnistory_eval.judges.judge.JUDGE_PARAMETERS`):

``base_url`` (required), ``model`` (served model name; default: the checkpoint id),
``api_key_env`` (environment variable holding the key; unset means the placeholder key ``EMPTY``
that local servers accept), ``concurrency`` (requests in flight at most; default: the paper's
``max_num_seqs``), ``timeout`` (s per request), ``max_retries``, ``max_retry_wait`` (cap on one
wait, s), ``vllm_extras`` (send vLLM's non-OpenAI fields: repetition penalty, chat-template
switches, stop token ids, multimodal processor options; switch off for hosted APIs),
``media`` (``"data_url"``: inline base64, the default; ``"file_url"``: ``file://`` paths for a
server started with ``--allowed-local-media-path``), ``max_tokens_field`` (``max_tokens`` or
``max_completion_tokens``).

Failed requests are retried by the project's one retry policy (:mod:`omnistory_core.kit.retry`, the
planners' too): on the statuses of :data:`~omnistory_core.kit.retry.RETRYABLE_STATUSES`
(408/409/425/429/5xx), connection errors and timeouts; a ``Retry-After`` (or ``retry-after-ms``)
header sets the wait (capped at ``max_retry_wait``), otherwise it grows exponentially from 0.5 s.
The SDK's own retries are off so that this policy is the only one.  Once a request has found the
server unreachable after all its retries, the remaining requests of this client fail at once
instead of each waiting through its own retries.  A request the server rejects for its content
(HTTP 400, 413, 422) or whose attachment cannot be read is marked ``error_kind="request"``;
every other failure is an infrastructure error that the next run retries.

``batch=true`` (with ``batch_poll_s``, ``batch_wait_s``, ``batch_max_requests``,
``batch_max_bytes``) sends the prompts of a stage through the OpenAI Batch API instead, at half
price (:mod:`omnistory_core.kit.batches`): the same request bodies, a ledger under the store that
the
judge hands on (:meth:`OpenAICompatibleBackend.bind_store`) so that a re-run polls instead of
resubmitting, and the synchronous path above for every prompt without a batch result.  A prompt
whose batch had not ended within ``batch_wait_s`` is an inference failure (``error_kind``
``batch_pending``), which the evaluation never stores: the next run polls its batch.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from omnistory_core.kit.batches import (
    BATCH_PENDING,
    BatchLedger,
    BatchSettings,
    OpenAIBatches,
    custom_id,
    public_url,
    retrying,
    run_batches,
)
from omnistory_core.kit.retry import (
    RETRYABLE_STATUSES,
    ErrorInfo,
    RetryPolicy,
    call_with_retries,
    classify_api_error,
    parse_retry_after,
)
from omnistory_eval.judges import media
from omnistory_eval.judges.backends.base import Decoding, Generation
from omnistory_eval.judges.render import RenderedPrompt
from omnistory_eval.judges.specs import JudgeSpec

#: the statuses retried (the shared policy's; kept under this name for existing imports)
RETRY_STATUSES = RETRYABLE_STATUSES
#: the request's content is the problem: the same request is rejected again
REJECTED_STATUSES = frozenset({400, 413, 422})
#: the first backoff wait without a ``Retry-After`` (doubling each retry, at most 30 s)
BASE_RETRY_DELAY_S = 0.5
MAX_BACKOFF_S = 30.0


def retry_after_seconds(headers: Any) -> float | None:
    """The wait a server asked for: :func:`omnistory_core.kit.retry.parse_retry_after` (kept under
    this name for existing imports)."""
    return parse_retry_after(headers)


class _ServerUnreachable(Exception):
    """Raised instead of sending once an earlier request found the server unreachable."""


def to_chat_messages(messages: list[dict[str, Any]], media_mode: str = "data_url") -> list[dict]:
    """Canonical messages -> chat-completions messages (``image_url`` / ``input_audio`` parts)."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": content})
            continue
        parts = []
        for part in content:
            kind = part["type"]
            if kind == "text":
                parts.append({"type": "text", "text": part["text"]})
            elif kind == "image":
                url = (
                    Path(part["image"]).resolve().as_uri()
                    if media_mode == "file_url"
                    else media.image_data_url(part["image"])
                )
                parts.append({"type": "image_url", "image_url": {"url": url}})
            elif kind == "audio":
                if media_mode == "file_url":
                    url = Path(part["audio"]).resolve().as_uri()
                    parts.append({"type": "audio_url", "audio_url": {"url": url}})
                else:
                    data, fmt = media.audio_base64(part["audio"])
                    audio = {"data": data, "format": fmt}
                    parts.append({"type": "input_audio", "input_audio": audio})
            else:
                raise ValueError(f"unsupported content part type {kind!r}")
        out.append({"role": message["role"], "content": parts})
    return out


class OpenAICompatibleBackend:
    """Bounded-concurrency client for one served judge model."""

    def __init__(
        self,
        spec: JudgeSpec,
        params: dict[str, Any],
        *,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if not params.get("base_url"):
            raise ValueError(
                f"judge {spec.id}: the openai backend needs `base_url` (e.g. "
                f"judge.{spec.id}.base_url=http://127.0.0.1:8000/v1)"
            )
        self.spec = spec
        self.params = params
        self.decoding = Decoding.from_spec(spec, params)
        self.base_url = str(params["base_url"])
        self.model = str(params.get("model") or params.get("checkpoint") or spec.checkpoint)
        if not self.model:
            raise ValueError(f"judge {spec.id}: set `model` (the served model name)")
        self.concurrency = max(int(params.get("concurrency") or spec.max_num_seqs), 1)
        self.timeout = float(params.get("timeout") or 600.0)
        self.max_retries = int(params.get("max_retries", 5))
        self.max_retry_wait = float(params.get("max_retry_wait") or 120.0)
        self.vllm_extras = bool(params.get("vllm_extras", spec.vllm_extras))
        self.media_mode = str(params.get("media") or "data_url")
        self.max_tokens_field = str(params.get("max_tokens_field") or "max_tokens")
        self._sleep = sleep
        self._client: Any = None
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self._unreachable: str | None = None
        self._store_root: Path | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def load(self) -> None:
        import openai

        env = self.params.get("api_key_env")
        key = os.environ.get(str(env)) if env else None
        if env and not key:
            raise ValueError(f"judge {self.spec.id}: environment variable {env} is not set")
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=key or "EMPTY",
            max_retries=0,
            timeout=self.timeout,
        )

    def bind_store(self, root: Any) -> None:
        """The store's root: the batch ledger lives under ``<root>/batches/judge-<id>/``."""
        self._store_root = Path(root)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- requests -------------------------------------------------------------------------
    def request_kwargs(self, prompt: RenderedPrompt) -> dict[str, Any]:
        """The chat-completions call for one prompt (public for audits and tests)."""
        d = self.decoding
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_chat_messages(prompt.messages, self.media_mode),
            "temperature": d.temperature,
            "top_p": d.top_p,
            "seed": d.seed,
            self.max_tokens_field: d.max_new_tokens,
        }
        if prompt.json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "judge_answer",
                    "schema": prompt.json_schema,
                    "strict": True,
                },
            }
        if self.vllm_extras:
            extra: dict[str, Any] = {"repetition_penalty": d.repetition_penalty}
            if prompt.chat_template_kwargs:
                extra["chat_template_kwargs"] = dict(prompt.chat_template_kwargs)
            if prompt.stop_token_ids:
                extra["stop_token_ids"] = list(prompt.stop_token_ids)
            mm = self.spec.engine_kwargs.get("mm_processor_kwargs")
            if mm:
                extra["mm_processor_kwargs"] = dict(mm)
            kwargs["extra_body"] = extra
        return kwargs

    @property
    def policy(self) -> RetryPolicy:
        """The shared retry policy with this judge's ``max_retries`` and ``max_retry_wait``."""
        return RetryPolicy(
            max_retries=self.max_retries,
            base_delay_s=BASE_RETRY_DELAY_S,
            max_delay_s=min(MAX_BACKOFF_S, self.max_retry_wait),
            max_retry_after_s=self.max_retry_wait,
        )

    def classify_error(self, exc: BaseException) -> ErrorInfo:
        """The shared classification with the openai SDK's timeout and connection errors."""
        import openai

        if isinstance(exc, _ServerUnreachable):
            return ErrorInfo("model_error", f"{exc} (not sent: the server was unreachable)")
        return classify_api_error(
            exc,
            timeout_types=(openai.APITimeoutError,),
            connection_types=(openai.APIConnectionError,),
        )

    def _send(self, kwargs: dict[str, Any]) -> Any:
        if self._unreachable is not None:
            raise _ServerUnreachable(self._unreachable)
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return self._client.chat.completions.create(**kwargs)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _call(self, kwargs: dict[str, Any]) -> Generation:
        import openai

        outcome = call_with_retries(
            lambda: self._send(kwargs), self.classify_error, self.policy, sleep=self._sleep
        )
        if outcome.error is None:
            return _generation_from(outcome.value, outcome.attempts)
        exc, error = outcome.exception, outcome.error
        if isinstance(exc, _ServerUnreachable):
            return Generation(text=None, error=error.message, attempts=outcome.attempts - 1)
        if isinstance(exc, openai.APIConnectionError) and not isinstance(
            exc, openai.APITimeoutError
        ):
            self._unreachable = f"{self.base_url}: {error.message}"
        kind = "request" if error.status in REJECTED_STATUSES else None
        return Generation(
            text=None, error=error.message, error_kind=kind, attempts=outcome.attempts
        )

    def generate(self, prompts: list[RenderedPrompt]) -> list[Generation]:
        if self._client is None:
            self.load()
        calls = []
        for prompt in prompts:
            try:
                calls.append(self.request_kwargs(prompt))
            except (OSError, ValueError) as exc:  # unreadable media: this item fails, not the batch
                calls.append(exc)

        def one(call: dict[str, Any] | Exception) -> Generation:
            if isinstance(call, Exception):
                return Generation(
                    text=None,
                    error=f"{type(call).__name__}: {call}",
                    error_kind="request",
                    attempts=0,
                )
            return self._call(call)

        if self.params.get("batch"):
            return self._generate_batched(calls, one)
        return self._map(one, calls)

    def _map(self, one: Callable[[Any], Generation], calls: list[Any]) -> list[Generation]:
        if self.concurrency == 1 or len(calls) <= 1:
            return [one(c) for c in calls]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(one, calls))

    # -- provider batches -----------------------------------------------------------------
    @staticmethod
    def batch_body(kwargs: dict[str, Any]) -> dict[str, Any]:
        """The JSON body ``chat.completions.create(**kwargs)`` sends (``extra_body`` merged)."""
        body = {k: v for k, v in kwargs.items() if k != "extra_body"}
        body.update(kwargs.get("extra_body") or {})
        return body

    def _generate_batched(
        self, calls: list[dict[str, Any] | Exception], one: Callable[[Any], Generation]
    ) -> list[Generation]:
        """``generate`` with ``batch=true``: one OpenAI batch (several past the limits); the
        prompts without a batch result go through ``one`` (the synchronous call)."""
        bodies: dict[str, dict[str, Any]] = {}
        ids: dict[int, str] = {}
        for n, call in enumerate(calls):
            if isinstance(call, dict):
                body = self.batch_body(call)
                ids[n] = custom_id(body)
                bodies.setdefault(ids[n], body)
        api = OpenAIBatches()
        ledger = BatchLedger(
            self._store_root,
            f"judge-{self.spec.id}",
            provider=api.provider,
            endpoint=public_url(getattr(self._client, "base_url", self.base_url)),
        )
        outcomes = run_batches(
            api,
            self._client,
            list(bodies),
            bodies.__getitem__,  # generate built every request already: no second copy
            ledger,
            BatchSettings.from_params(self.params, api.limits),
            call=retrying(self.classify_error, self.policy, sleep=self._sleep),
            label=f"judge={self.spec.id}",
            sleep=self._sleep,
        )
        results: list[Generation | None] = [None] * len(calls)
        synchronous: list[int] = []
        for n in range(len(calls)):
            outcome = outcomes.get(ids[n]) if n in ids else None
            if outcome is None or outcome.status == "fallback":
                synchronous.append(n)  # an unreadable attachment's error comes from `one`
            elif outcome.status == "ok":
                try:
                    generation = _generation_from(outcome.response, 1)
                except (AttributeError, TypeError, ValueError):
                    synchronous.append(n)
                    continue
                generation.usage.update(batch=True, batch_id=outcome.batch_id, batch_calls=1)
                results[n] = generation
            else:
                kind = BATCH_PENDING if outcome.status == "pending" else None
                results[n] = Generation(text=None, error=outcome.reason, error_kind=kind)
        answers = self._map(one, [calls[n] for n in synchronous])
        for n, generation in zip(synchronous, answers, strict=True):
            if n in ids:
                generation.usage["batch_fallback_calls"] = 1
            results[n] = generation
        return [g for g in results if g is not None]


def _generation_from(response: Any, attempts: int) -> Generation:
    if not response.choices:
        return Generation(text=None, error="the server returned no choices", attempts=attempts)
    choice = response.choices[0]
    usage = response.usage.model_dump() if getattr(response, "usage", None) else {}
    return Generation(
        text=(choice.message.content or "").strip(),
        finish_reason=choice.finish_reason,
        usage={k: v for k, v in usage.items() if isinstance(v, (int, float))},
        attempts=attempts,
    )
