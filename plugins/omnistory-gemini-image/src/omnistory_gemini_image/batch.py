"""The Gemini Batch API (``image.batch=true`` of ``image=nanobanana``) through ``google-genai``.

* **create**: ``client.batches.create(model=..., src=[InlinedRequest, ...])``, i.e. ``POST
  .../models/{model}:batchGenerateContent`` with the requests inline; each request is the
  synchronous ``generateContent`` request (the same ``contents`` parts in the same order, the
  same ``generationConfig``) with ``metadata {"key": custom_id}``.  The Gemini API takes up to
  20 MB of inline requests per batch (:data:`~omnistory_core.kit.batches.GEMINI_LIMITS`); more go
  in further batches;
* **poll**: ``client.batches.get(name="batches/...")``; ``JOB_STATE_SUCCEEDED`` /
  ``PARTIALLY_SUCCEEDED`` / ``CANCELLED`` / ``EXPIRED`` have ended, ``FAILED`` ended with no
  results (its requests go the synchronous way), any other state is still running;
* **results**: the job's ``dest.inlined_responses``, matched to the requests by the ``metadata``
  the API echoes (an answer without it counts as missing: its request goes the synchronous way).
  An answer's ``response`` is a ``GenerateContentResponse`` (read as the synchronous answer is);
  its ``error`` (a ``google.rpc.Status``, gRPC code) sends the request the synchronous way when
  the code is transient (:data:`TRANSIENT_CODES`), else is the request's failure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from omnistory_core.kit.batches import (
    GEMINI_LIMITS,
    BatchAPI,
    BatchState,
    Call,
    ItemResult,
)
from omnistory_core.kit.image_batches import RequestError

#: gRPC codes of a request error that sending it again may fix: UNKNOWN, DEADLINE_EXCEEDED,
#: RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE
TRANSIENT_CODES = frozenset({2, 4, 8, 10, 13, 14})
#: job states after which the results can be read
ENDED = frozenset(
    {
        "JOB_STATE_SUCCEEDED",
        "JOB_STATE_PARTIALLY_SUCCEEDED",
        "JOB_STATE_CANCELLED",
        "JOB_STATE_EXPIRED",
    }
)


def state_name(value: Any) -> str:
    return str(getattr(value, "value", value) or "")


class GeminiBatches(BatchAPI):
    """Gemini batch jobs of inline ``generateContent`` requests for one model."""

    provider = "gemini"
    limits = GEMINI_LIMITS

    def __init__(self, model: str):
        self.model = model

    def line(self, cid: str, body: Mapping[str, Any]) -> bytes:
        # the request with its key, as google-genai's InlinedRequest reads it back
        payload = {**body, "metadata": {"key": cid}}
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def submit(self, client: Any, lines: list[bytes], call: Call) -> str:
        from google.genai import types

        requests = [types.InlinedRequest.model_validate_json(line) for line in lines]
        job = call(
            lambda: client.batches.create(
                model=self.model,
                src=requests,
                config=types.CreateBatchJobConfig(display_name="omnistory"),
            )
        )
        return str(job.name)

    def poll(self, client: Any, batch_id: str, call: Call) -> BatchState:
        job = call(lambda: client.batches.get(name=batch_id))
        status = state_name(job.state)
        if status == "JOB_STATE_FAILED":
            error = getattr(job, "error", None)
            message = str(getattr(error, "message", "") or "")
            return BatchState(status, ended=True, failed=True, message=message, raw=job)
        return BatchState(status, ended=status in ENDED, raw=job)

    def results(
        self, client: Any, batch_id: str, state: BatchState, call: Call
    ) -> dict[str, ItemResult]:
        dest = getattr(state.raw, "dest", None)
        out: dict[str, ItemResult] = {}
        for answer in getattr(dest, "inlined_responses", None) or []:
            key = (getattr(answer, "metadata", None) or {}).get("key")
            if not isinstance(key, str):
                continue
            error = getattr(answer, "error", None)
            if error is not None:
                code = getattr(error, "code", None)
                text = " ".join(str(getattr(error, "message", "") or "").split())[:500]
                message = f"gRPC code {code}: {text}"
                if code in TRANSIENT_CODES:
                    out[key] = ItemResult(error=message)
                else:
                    out[key] = ItemResult(response=RequestError("model_error", message))
            elif getattr(answer, "response", None) is not None:
                out[key] = ItemResult(response=answer.response)
        return out


__all__ = ["ENDED", "TRANSIENT_CODES", "GeminiBatches"]
