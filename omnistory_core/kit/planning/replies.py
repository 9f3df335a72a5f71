"""Reading the SDKs' responses into a :class:`ModelReply` (duck typed: no SDK import).

The raw text is passed on untouched, whatever it contains: the engine's ``parse_plan`` decides
whether it is a plan, so a malformed or truncated answer becomes a categorized failure there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: finish/stop reasons that mean the output was cut by the token limit
TRUNCATION_REASONS = frozenset({"length", "max_tokens", "model_context_window_exceeded"})


@dataclass
class ModelReply:
    """The model's raw text and the token counts the API reported."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    extra_usage: dict[str, int | float] = field(default_factory=dict)


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def reply_from_chat_completion(response: Any) -> ModelReply:
    """A Chat Completions response (OpenAI SDK object; also vLLM's) -> :class:`ModelReply`.

    The text is the first choice's ``content``; a structured-output refusal (``refusal``) is
    passed on as the text so the failure message shows it.  ``truncated_calls`` counts answers
    cut by the token limit, ``reasoning_tokens`` is kept where the API reports it.
    """
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise ValueError("the API returned no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    text = getattr(message, "content", None)
    if not isinstance(text, str) or not text:
        refusal = getattr(message, "refusal", None)
        text = refusal if isinstance(refusal, str) else (text or "")
    usage = getattr(response, "usage", None)
    extra: dict[str, int | float] = {}
    details = getattr(usage, "completion_tokens_details", None)
    reasoning = _int_or_none(getattr(details, "reasoning_tokens", None))
    if reasoning is not None:
        extra["reasoning_tokens"] = reasoning
    extra["truncated_calls"] = int(getattr(choice, "finish_reason", None) in TRUNCATION_REASONS)
    return ModelReply(
        text=text,
        input_tokens=_int_or_none(getattr(usage, "prompt_tokens", None)),
        output_tokens=_int_or_none(getattr(usage, "completion_tokens", None)),
        extra_usage=extra,
    )


def reply_from_anthropic_message(response: Any, tool_name: str | None = None) -> ModelReply:
    """An Anthropic ``Message`` -> :class:`ModelReply`.

    With ``tool_name`` (forced tool use) the text is the JSON of that tool call's input; without
    a matching tool call (or without ``tool_name``) it is the concatenated text blocks.
    """
    blocks = getattr(response, "content", None) or []
    text = None
    if tool_name is not None:
        for block in blocks:
            if (
                getattr(block, "type", None) == "tool_use"
                and getattr(block, "name", None) == tool_name
            ):
                text = json.dumps(getattr(block, "input", None), ensure_ascii=False)
                break
    if text is None:
        text = "".join(
            getattr(b, "text", "") or "" for b in blocks if getattr(b, "type", None) == "text"
        )
    usage = getattr(response, "usage", None)
    extra: dict[str, int | float] = {
        "truncated_calls": int(getattr(response, "stop_reason", None) in TRUNCATION_REASONS)
    }
    for key in ("cache_read_input_tokens", "cache_creation_input_tokens"):
        value = _int_or_none(getattr(usage, key, None))
        if value:
            extra[key] = value
    return ModelReply(
        text=text,
        input_tokens=_int_or_none(getattr(usage, "input_tokens", None)),
        output_tokens=_int_or_none(getattr(usage, "output_tokens", None)),
        extra_usage=extra,
    )


__all__ = [
    "ModelReply",
    "TRUNCATION_REASONS",
    "reply_from_anthropic_message",
    "reply_from_chat_completion",
]
