"""What an evaluator's outcome means for the scores table: a score, ``invalid``, or ``error``.

``invalid`` keeps the paper's meaning: the evaluator answered (or its input is unusable, which
no retry changes) and no score can be taken from it.  ``error`` is everything else that kept an
evaluator from answering — it could not load (package, weights, key), its server was unreachable,
a request timed out after its retries, it ran out of memory, its worker died.  An ``error`` says
nothing about the system being evaluated: it is never stored as a result, the next run computes it
again, and aggregation leaves it out.

Stored call records are classified from their JSON alone, so results cached by any earlier
version are read the same way.
"""

from __future__ import annotations

from typing import Any

#: exception types raised for one item's unusable input: deterministic, so a result (``invalid``)
ITEM_EXCEPTIONS: frozenset[str] = frozenset(
    {"ValueError", "JudgeInputError", "UnicodeDecodeError", "JSONDecodeError", "LibsndfileError"}
)

#: ``detail["error_kind"]`` of a judge whose request was rejected for its content (HTTP 400, an
#: unreadable attachment, a prompt longer than the context): the same request fails again
REQUEST_REJECTED = "request"


class EvaluatorUnavailable(RuntimeError):
    """Part of an evaluator could not run (its worker died, say): an ``error``, not a verdict."""


def is_infrastructure_exception(exc: BaseException) -> bool:
    """An exception that certainly says nothing about the item: a dead worker, out of memory, a
    connection problem or a timeout.  (An evaluator that tolerates per-item failures uses this to
    tell them from a failure of its own machinery.)"""
    if isinstance(exc, EvaluatorUnavailable | MemoryError | ConnectionError | TimeoutError):
        return True
    return any("OutOfMemoryError" in cls.__name__ for cls in type(exc).__mro__)


def is_item_exception(exc: BaseException | str | None) -> bool:
    """Whether an exception (or its type name) is about the item rather than the evaluator."""
    if exc is None:
        return False
    if isinstance(exc, BaseException):
        return any(cls.__name__ in ITEM_EXCEPTIONS for cls in type(exc).__mro__)
    return str(exc) in ITEM_EXCEPTIONS


def describe_exception(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _failure_exception_name(failure: dict[str, Any]) -> str | None:
    name = failure.get("exception")
    if name:
        return str(name)
    message = str(failure.get("message") or "")
    head, sep, _ = message.partition(":")
    return head.strip() if sep and head.strip().isidentifier() else None


def failure_error_cause(failure: dict[str, Any] | None) -> str | None:
    """The cause when a failed call is an infrastructure error; None when it is about the item."""
    failure = failure or {}
    message = " ".join(str(failure.get("message") or "").split())
    category = str(failure.get("category") or "model_error")
    if category != "timeout" and is_item_exception(_failure_exception_name(failure)):
        return None
    return message or category


def output_error_cause(output: dict[str, Any] | None) -> str | None:
    """The cause when an evaluator result (a record with status ``ok``) is an error."""
    output = output or {}
    raw_detail = output.get("detail")
    detail: dict[str, Any] = raw_detail if isinstance(raw_detail, dict) else {}
    if output.get("status") == "error":
        return str(detail.get("error") or detail.get("failure") or "evaluator error")
    if detail.get("inference_status") == "error" and detail.get("error_kind") != REQUEST_REJECTED:
        # results cached before error_kind existed are errors too: recomputing them is safe
        return str(detail.get("failure") or detail.get("error") or "inference failed")
    return None


def record_error_cause(record: Any) -> str | None:
    """The cause when a stored call record is an infrastructure error (never kept as a result)."""
    status = getattr(record, "status", None)
    if status is None:
        return None
    if status != "ok":
        return failure_error_cause(getattr(record, "failure", None))
    return output_error_cause(getattr(record, "output", None))
