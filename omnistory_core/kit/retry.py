"""The one retry policy of every API call: planners, judges and plugins share it.

Retries with exponential backoff that honour ``Retry-After`` (and ``retry-after-ms``), the HTTP
statuses worth retrying (:data:`RETRYABLE_STATUSES`), error classification and bounded
concurrency.  All of it is SDK-independent: a caller wraps one API call in
:func:`call_with_retries` with a ``classify`` function that turns the SDK's exception into an
:class:`ErrorInfo` (retry or not, failure category, HTTP status, server-requested wait), and fans
a batch out with :func:`map_bounded`.  The SDKs' own retry loops are switched off by the callers
so that this is the only one, and every wait is accounted for.

:mod:`omnistory_core.kit.retry` re-exports this module (its historical home).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: HTTP statuses worth retrying: request timeout, conflict/lock, too early, rate limit, 5xx
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429}) | frozenset(range(500, 600))


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry one call.

    ``max_retries`` retries follow the first attempt.  Without a ``Retry-After`` the n-th retry
    waits ``base_delay_s * 2**n`` (capped at ``max_delay_s``) times a random factor in
    ``[1 - jitter, 1]``; with one, exactly the server's wait (capped at ``max_retry_after_s``).
    """

    max_retries: int = 3
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    max_retry_after_s: float = 300.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter must be in [0, 1], got {self.jitter}")


@dataclass(frozen=True)
class ErrorInfo:
    """A classified call error."""

    category: str  # a Failure category: "timeout" or "model_error"
    message: str
    retryable: bool = False
    retry_after_s: float | None = None
    #: the HTTP status of the answer, when the error was one
    status: int | None = None


@dataclass
class CallOutcome:
    """Result of :func:`call_with_retries`: ``value`` or ``error``, plus what it took.

    ``exception`` is the exception behind ``error`` (the last attempt's), for callers that need
    more than its classification."""

    value: Any = None
    error: ErrorInfo | None = None
    attempts: int = 0
    waited_s: float = 0.0
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait, or ``None``.

    Reads ``retry-after-ms`` (milliseconds, sent by some APIs), then ``Retry-After`` as delta
    seconds or as an HTTP date.  Header names are matched case-insensitively; negative or
    unparseable values give ``None``.
    """
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    raw_ms = lower.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    raw = lower.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        import email.utils

        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when is None:
            return None
        value = when.timestamp() - (time.time() if now is None else now)
        return max(0.0, value)
    return value if value >= 0 else None


def backoff_delay(retry_index: int, policy: RetryPolicy, rng: random.Random | None = None) -> float:
    """The wait before retry number ``retry_index`` (0-based) when the server named none."""
    delay = min(policy.max_delay_s, policy.base_delay_s * (2.0**retry_index))
    if policy.jitter:
        delay *= 1.0 - policy.jitter * (rng or random).random()
    return max(0.0, delay)


def call_with_retries(
    fn: Callable[[], T],
    classify: Callable[[BaseException], ErrorInfo],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> CallOutcome:
    """Call ``fn`` until it returns, the error is not retryable, or retries run out.

    Never raises for errors of ``fn`` (``classify`` decides what they mean); a bug in
    ``classify`` itself propagates.
    """
    outcome = CallOutcome()
    for attempt in range(policy.max_retries + 1):
        outcome.attempts = attempt + 1
        try:
            outcome.value = fn()
            outcome.error = None
            outcome.exception = None
            return outcome
        except Exception as exc:  # noqa: BLE001 - classified below, kept as data
            info = classify(exc)
            outcome.exception = exc
        outcome.error = info
        if not info.retryable or attempt == policy.max_retries:
            return outcome
        if info.retry_after_s is not None:
            delay = min(max(0.0, info.retry_after_s), policy.max_retry_after_s)
        else:
            delay = backoff_delay(attempt, policy, rng)
        outcome.waited_s += delay
        sleep(delay)
    return outcome  # pragma: no cover - the loop always returns


def map_bounded(
    fn: Callable[[T], R], items: Sequence[T], max_concurrency: int
) -> list[R | BaseException]:
    """``[fn(item) for item in items]`` with at most ``max_concurrency`` calls in flight.

    Order is kept; an exception raised by ``fn`` becomes that item's result instead of aborting
    the others (the engine records exception results as failures).
    """
    import contextvars

    from omnistory_core.components import calling_examples, current_examples

    limit = max(1, int(max_concurrency))
    # the engine names one example per item of a run_batch: each item's call, in whatever thread,
    # sees its own id (threads do not inherit context variables by themselves); items that are
    # not the batch's (one example's sub-calls) see the batch's ids
    ids = current_examples()
    per_item = len(ids) == len(items)

    def guarded(n: int, item: T) -> R | BaseException:
        try:
            if per_item:
                with calling_examples([ids[n]]):
                    return fn(item)
            return fn(item)
        except Exception as exc:  # noqa: BLE001 - one item's error is that item's result
            return exc

    if limit == 1 or len(items) <= 1:
        return [guarded(n, item) for n, item in enumerate(items)]
    with ThreadPoolExecutor(
        max_workers=min(limit, len(items)), thread_name_prefix="omnistory-call"
    ) as pool:
        futures = [
            pool.submit(contextvars.copy_context().run, guarded, n, item)
            for n, item in enumerate(items)
        ]
        return [f.result() for f in futures]


def classify_api_error(
    exc: BaseException,
    *,
    timeout_types: tuple[type[BaseException], ...] = (),
    connection_types: tuple[type[BaseException], ...] = (),
    max_message: int = 500,
) -> ErrorInfo:
    """Classify an API client error by duck typing (OpenAI and Anthropic SDKs share the shape).

    * a timeout type or ``TimeoutError``: ``timeout``, retryable;
    * an object with an ``int`` ``status_code`` (HTTP error): retryable for
      :data:`RETRYABLE_STATUSES` with the ``Retry-After`` of ``exc.response.headers``; category
      ``timeout`` for 408/504, ``model_error`` otherwise;
    * a connection type: ``model_error``, retryable;
    * anything else: ``model_error``, not retryable.
    """
    text = " ".join(str(exc).split())
    if len(text) > max_message:
        text = text[: max_message - 3] + "..."
    message = f"{type(exc).__name__}: {text}"
    if isinstance(exc, TimeoutError) or (timeout_types and isinstance(exc, timeout_types)):
        return ErrorInfo("timeout", message, retryable=True)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        headers = getattr(getattr(exc, "response", None), "headers", None)
        return ErrorInfo(
            "timeout" if status in (408, 504) else "model_error",
            f"HTTP {status}: {message}",
            retryable=status in RETRYABLE_STATUSES,
            retry_after_s=parse_retry_after(headers),
            status=status,
        )
    if connection_types and isinstance(exc, connection_types):
        return ErrorInfo("model_error", message, retryable=True)
    return ErrorInfo("model_error", message, retryable=False)


__all__ = [
    "RETRYABLE_STATUSES",
    "CallOutcome",
    "ErrorInfo",
    "RetryPolicy",
    "backoff_delay",
    "call_with_retries",
    "classify_api_error",
    "map_bounded",
    "parse_retry_after",
]
