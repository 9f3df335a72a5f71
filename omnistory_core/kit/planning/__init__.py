"""Shared machinery of the VLM planners (kept light: no SDK is imported here).

* :mod:`~omnistory_core.kit.planning.prompts`: the project's planner prompt and its variants;
* :mod:`~omnistory_core.kit.planning.messages`: one request per example, in OpenAI and Anthropic
  wire formats (image inline as base64);
* :mod:`~omnistory_core.kit.retry`: the planners' name for :mod:`omnistory_core.kit.retry`, the
  one retry policy (backoff honouring ``Retry-After``, error classification, bounded concurrency)
  that the judges share;
* :mod:`~omnistory_core.kit.planning.replies`: SDK responses -> raw text + token counts;
* :mod:`~omnistory_core.kit.planning.usage`: token usage and cost from a configurable price table;
* :mod:`~omnistory_core.kit.planning.base`: :class:`VLMPlanner`, the base class tying these
together;
* :mod:`~omnistory_core.kit.planning.openai_chat`: :class:`OpenAIChatPlanner`, a VLMPlanner for any
  OpenAI-compatible Chat Completions server (the ``gpt`` and vLLM planners);
* ``batch=true`` (``gpt``, ``claude``): the provider batch APIs, :mod:`omnistory_core.kit.batches`;
* :mod:`~omnistory_core.kit.planning.lengths`: narration length of a run vs. the references;
* :mod:`~omnistory_testkit.servers`: a local server speaking the APIs' wire formats.
"""

from __future__ import annotations

from omnistory_core.kit.planning.base import PlannerConfigError, VLMPlanner
from omnistory_core.kit.planning.messages import (
    EncodedImage,
    PlannerRequest,
    anthropic_messages,
    build_request,
    encode_image,
    openai_chat_messages,
)
from omnistory_core.kit.planning.openai_chat import OpenAIChatPlanner
from omnistory_core.kit.planning.prompts import PROMPT_VARIANTS, PromptVariant, get_variant
from omnistory_core.kit.planning.replies import (
    ModelReply,
    reply_from_anthropic_message,
    reply_from_chat_completion,
)
from omnistory_core.kit.planning.usage import Price, parse_price_table, usage_record
from omnistory_core.kit.retry import (
    CallOutcome,
    ErrorInfo,
    RetryPolicy,
    call_with_retries,
    classify_api_error,
    map_bounded,
    parse_retry_after,
)

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
