"""Retry-After parsing, backoff, retry decisions, error classification and bounded concurrency."""

from __future__ import annotations

import email.utils
import threading

import pytest

from omnistory_core.kit.retry import (
    ErrorInfo,
    RetryPolicy,
    backoff_delay,
    call_with_retries,
    classify_api_error,
    map_bounded,
    parse_retry_after,
)

# -- Retry-After ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"RETRY-AFTER": "0"}, 0.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "junk", "retry-after": "9"}, 9.0),
        ({"retry-after": "-4"}, None),
        ({"retry-after": "soon"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_parse_retry_after(headers, expected):
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date():
    now = 1_700_000_000.0
    header = email.utils.formatdate(now + 7, usegmt=True)
    assert parse_retry_after({"Retry-After": header}, now=now) == pytest.approx(7.0)
    past = email.utils.formatdate(now - 60, usegmt=True)
    assert parse_retry_after({"Retry-After": past}, now=now) == 0.0


# -- backoff and the retry loop ---------------------------------------------------------------


def test_backoff_without_jitter_doubles_up_to_the_cap():
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=5.0, jitter=0.0)
    assert [backoff_delay(i, policy) for i in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_backoff_jitter_stays_in_range():
    import random

    policy = RetryPolicy(base_delay_s=2.0, jitter=0.5)
    rng = random.Random(0)
    delays = [backoff_delay(0, policy, rng) for _ in range(200)]
    assert all(1.0 <= d <= 2.0 for d in delays)
    assert max(delays) - min(delays) > 0.5


class Flaky:
    """Fails with the given errors, then returns 'done'."""

    def __init__(self, *errors: BaseException):
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def classify(exc: BaseException) -> ErrorInfo:
    retry_after = getattr(exc, "retry_after", None)
    return ErrorInfo(
        "model_error", str(exc), retryable=not isinstance(exc, KeyError), retry_after_s=retry_after
    )


class Limited(Exception):
    def __init__(self, retry_after):
        super().__init__("429")
        self.retry_after = retry_after


def test_retry_after_is_waited_exactly():
    sleeps: list[float] = []
    fn = Flaky(Limited(2.5), Limited(0.0))
    out = call_with_retries(
        fn, classify, RetryPolicy(max_retries=3, jitter=0.0), sleep=sleeps.append
    )
    assert (out.ok, out.value, out.attempts, fn.calls) == (True, "done", 3, 3)
    assert sleeps == [2.5, 0.0]
    assert out.waited_s == 2.5


def test_retry_after_is_capped():
    sleeps: list[float] = []
    call_with_retries(
        Flaky(Limited(10_000.0)), classify, RetryPolicy(max_retry_after_s=30.0), sleep=sleeps.append
    )
    assert sleeps == [30.0]


def test_backoff_used_without_retry_after():
    sleeps: list[float] = []
    out = call_with_retries(
        Flaky(OSError("a"), OSError("b")),
        classify,
        RetryPolicy(base_delay_s=0.5, jitter=0.0),
        sleep=sleeps.append,
    )
    assert out.ok and sleeps == [0.5, 1.0]


def test_non_retryable_error_stops_at_once():
    sleeps: list[float] = []
    fn = Flaky(KeyError("bad request"))
    out = call_with_retries(fn, classify, RetryPolicy(max_retries=5), sleep=sleeps.append)
    assert (out.ok, out.attempts, fn.calls, sleeps) == (False, 1, 1, [])
    assert out.error.category == "model_error"


def test_retries_run_out():
    fn = Flaky(*[OSError(str(i)) for i in range(10)])
    out = call_with_retries(
        fn, classify, RetryPolicy(max_retries=2, jitter=0.0), sleep=lambda s: None
    )
    assert (out.ok, out.attempts, fn.calls) == (False, 3, 3)
    assert out.error.message == "2"


def test_policy_validation():
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=2.0)


# -- classification ---------------------------------------------------------------------------


class FakeResponse:
    def __init__(self, headers):
        self.headers = headers


class StatusError(Exception):
    """Shaped like the SDKs' APIStatusError (status_code + response.headers)."""

    def __init__(self, status, headers=None):
        super().__init__(f"Error code: {status}")
        self.status_code = status
        self.response = FakeResponse(headers or {})


class SdkTimeout(Exception):
    pass


class SdkConnection(Exception):
    pass


@pytest.mark.parametrize(
    ("exc", "category", "retryable", "retry_after"),
    [
        (StatusError(429, {"retry-after": "2"}), "model_error", True, 2.0),
        (StatusError(503), "model_error", True, None),
        (StatusError(529, {"retry-after-ms": "100"}), "model_error", True, 0.1),
        (StatusError(408), "timeout", True, None),
        (StatusError(504), "timeout", True, None),
        (StatusError(400), "model_error", False, None),
        (StatusError(401), "model_error", False, None),
        (SdkTimeout("slow"), "timeout", True, None),
        (TimeoutError("slow"), "timeout", True, None),
        (SdkConnection("refused"), "model_error", True, None),
        (ValueError("weird"), "model_error", False, None),
    ],
)
def test_classify_api_error(exc, category, retryable, retry_after):
    info = classify_api_error(exc, timeout_types=(SdkTimeout,), connection_types=(SdkConnection,))
    assert (info.category, info.retryable, info.retry_after_s) == (category, retryable, retry_after)
    assert type(exc).__name__ in info.message


def test_classify_truncates_long_messages():
    info = classify_api_error(ValueError("x" * 5000), max_message=100)
    assert len(info.message) < 130 and info.message.endswith("...")


# -- bounded concurrency ----------------------------------------------------------------------


def test_map_bounded_keeps_order_and_turns_exceptions_into_results():
    def fn(x):
        if x == 3:
            raise RuntimeError("three")
        return x * 10

    out = map_bounded(fn, [1, 2, 3, 4], max_concurrency=3)
    assert out[:2] == [10, 20] and out[3] == 40
    assert isinstance(out[2], RuntimeError)


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_map_bounded_never_exceeds_the_bound(limit):
    lock = threading.Condition()
    state = {"now": 0, "peak": 0, "started": 0}
    items = list(range(7))

    def fn(x):
        with lock:
            state["now"] += 1
            state["started"] += 1
            state["peak"] = max(state["peak"], state["now"])
            lock.notify_all()
            # hold until the bound is reached (or everything has started, or 5 s pass) so the
            # peak is observable without timing assumptions
            lock.wait_for(
                lambda: state["now"] >= limit or state["started"] == len(items), timeout=5
            )
        with lock:
            state["now"] -= 1
        return x

    assert map_bounded(fn, items, max_concurrency=limit) == items
    assert state["peak"] == limit


@pytest.mark.parametrize("limit", [1, 3])
def test_map_bounded_gives_each_item_its_example_id_in_every_thread(limit):
    from omnistory_core.components import calling_examples, current_example

    with calling_examples(["demo/a", "demo/b", "demo/c"]):
        seen = map_bounded(lambda item: (item, current_example()), [1, 2, 3], limit)
    assert seen == [(1, "demo/a"), (2, "demo/b"), (3, "demo/c")]
    # sub-calls of one example (its questions, say) each see that example, in every thread
    with calling_examples(["demo/a"]):
        assert map_bounded(lambda item: current_example(), [1, 2], limit) == ["demo/a"] * 2
