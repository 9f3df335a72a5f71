"""Shared machinery of the VLM planners (kept light: no SDK is imported here).

* :mod:`~omnistory_core.planning.prompts`: the project's planner prompt and its variants;
* :mod:`~omnistory_core.planning.messages`: one request per example, in OpenAI and Anthropic
  wire formats (image inline as base64);
* :mod:`~omnistory_core.planning.retry`: the planners' name for :mod:`omnistory_core.retry`, the
  one retry policy (backoff honouring ``Retry-After``, error classification, bounded concurrency)
  that the judges share;
* :mod:`~omnistory_core.planning.replies`: SDK responses -> raw text + token counts;
* :mod:`~omnistory_core.planning.usage`: token usage and cost from a configurable price table;
* :mod:`~omnistory_core.planning.base`: :class:`VLMPlanner`, the base class tying these together;
* :mod:`~omnistory_core.planning.openai_chat`: :class:`OpenAIChatPlanner`, a VLMPlanner for any
  OpenAI-compatible Chat Completions server (the ``gpt`` and vLLM planners);
* ``batch=true`` (``gpt``, ``claude``): the provider batch APIs, :mod:`omnistory_core.batch_api`;
* :mod:`~omnistory_core.planning.lengths`: narration length of a run vs. the references;
* :mod:`~omnistory_core.planning.testing`: a local server speaking the APIs' wire formats.
"""

from __future__ import annotations

from omnistory_core.planning.base import PlannerConfigError, VLMPlanner
from omnistory_core.planning.messages import (
    EncodedImage,
    PlannerRequest,
    anthropic_messages,
    build_request,
    encode_image,
    openai_chat_messages,
)
from omnistory_core.planning.openai_chat import OpenAIChatPlanner
from omnistory_core.planning.prompts import PROMPT_VARIANTS, PromptVariant, get_variant
from omnistory_core.planning.replies import (
    ModelReply,
    reply_from_anthropic_message,
    reply_from_chat_completion,
)
from omnistory_core.planning.retry import (
    CallOutcome,
    ErrorInfo,
    RetryPolicy,
    call_with_retries,
    classify_api_error,
    map_bounded,
    parse_retry_after,
)
from omnistory_core.planning.usage import Price, parse_price_table, usage_record

__all__ = [
    "CallOutcome",
    "EncodedImage",
    "ErrorInfo",
    "ModelReply",
    "OpenAIChatPlanner",
    "PROMPT_VARIANTS",
    "PlannerConfigError",
    "PlannerRequest",
    "Price",
    "PromptVariant",
    "RetryPolicy",
    "VLMPlanner",
    "anthropic_messages",
    "build_request",
    "call_with_retries",
    "classify_api_error",
    "encode_image",
    "get_variant",
    "map_bounded",
    "openai_chat_messages",
    "parse_price_table",
    "parse_retry_after",
    "reply_from_anthropic_message",
    "reply_from_chat_completion",
    "usage_record",
]
