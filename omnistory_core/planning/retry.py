"""The planners' name for :mod:`omnistory_core.retry`, the one retry policy (kept importable).

Planners, judges and plugins share :mod:`omnistory_core.retry`: the same retryable HTTP statuses,
the same ``Retry-After`` handling and the same backoff.
"""

from __future__ import annotations

from omnistory_core.retry import (
    RETRYABLE_STATUSES,
    CallOutcome,
    ErrorInfo,
    RetryPolicy,
    backoff_delay,
    call_with_retries,
    classify_api_error,
    map_bounded,
    parse_retry_after,
)

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
