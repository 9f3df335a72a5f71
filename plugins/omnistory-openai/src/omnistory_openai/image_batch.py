"""OpenAI's Batch API on the Images endpoints (``image.batch=true`` of ``image=gpt_image``).

The Batch API takes ``/v1/images/generations`` and ``/v1/images/edits`` (one endpoint per
batch; ``openai.types.BatchCreateParams``).  A batch line is JSON, so an edit goes in the
Images API's JSON form of an edit: ``images: [{"image_url": "data:image/jpeg;base64,..."}]``
(the same JPEG bytes, in the same order, that the synchronous call uploads as multipart
``image[]`` files; JSON edits take GPT image models only), with the same ``prompt``, ``model``,
``size``, ``n``, ``quality`` and ``input_fidelity``.  A request without input images is a
generation.  Files, polling and the ledger are :class:`~omnistory_core.kit.batches.
OpenAIBatches`'; only the answers differ: an ``ImagesResponse`` per line, and a line answered
with an HTTP error is sent again the synchronous way when the status is transient (408, 409,
425, 429, 5xx) and is otherwise the request's failure (``refused`` for a moderation refusal).
"""

from __future__ import annotations

import json
from typing import Any

from omnistory_core.kit.batches import BatchCallError, BatchState, Call, ItemResult, OpenAIBatches
from omnistory_core.kit.image_batches import RequestError
from omnistory_core.kit.retry import RETRYABLE_STATUSES

GENERATIONS = "/v1/images/generations"
EDITS = "/v1/images/edits"
#: the error codes of a request the moderation refused (the synchronous path's too)
REFUSAL_CODES = frozenset({"moderation_blocked", "content_policy_violation"})


class OpenAIImageBatches(OpenAIBatches):
    """OpenAI batches of one Images endpoint (:data:`GENERATIONS` or :data:`EDITS`)."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint

    def results(
        self, client: Any, batch_id: str, state: BatchState, call: Call
    ) -> dict[str, ItemResult]:
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
                continue  # its requests have no result: they go the synchronous way
            for raw in str(text).splitlines():
                try:
                    line = json.loads(raw) if raw.strip() else None
                except ValueError:
                    continue  # a damaged line: its request is missing, so it is sent again
                if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                    out[line["custom_id"]] = line_result(line)
        return out


def line_result(line: dict[str, Any]) -> ItemResult:
    """One output or error line as the request's answer."""
    from openai.types import ImagesResponse

    response = line.get("response") or {}
    status = response.get("status_code")
    body = response.get("body")
    error = line.get("error")
    if status == 200 and isinstance(body, dict) and not error:
        # construct (not validate), as the SDK reads its own responses
        return ItemResult(response=ImagesResponse.construct(**body))
    if isinstance(error, dict):  # never executed (expired, cancelled): send it again
        return ItemResult(error=f"{error.get('code') or 'error'}: {error.get('message') or ''}")
    detail = body.get("error") if isinstance(body, dict) else None
    detail = detail if isinstance(detail, dict) else {}
    code = detail.get("code")
    text = " ".join(str(detail.get("message") or "no answer").split())[:500]
    message = f"HTTP {status}{f' {code}' if code else ''}: {text}"
    if not isinstance(status, int) or status in RETRYABLE_STATUSES:
        return ItemResult(error=message)
    category = "refused" if code in REFUSAL_CODES else "model_error"
    return ItemResult(response=RequestError(category, message))


__all__ = ["EDITS", "GENERATIONS", "REFUSAL_CODES", "OpenAIImageBatches", "line_result"]
