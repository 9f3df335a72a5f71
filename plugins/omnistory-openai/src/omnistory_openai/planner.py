"""``planner=gpt``: GPT-5.4 through the OpenAI Python SDK (Chat Completions).

The page image goes as a base64 ``data:`` URL, the Plan JSON schema as a strict ``json_schema``
``response_format``.  Sending, error classification, retries and usage are
:class:`~omnistory_core.kit.planning.openai_chat.OpenAIChatPlanner`'s; this class adds GPT's
parameters.  The SDK is imported only when the client is made, so plugin discovery stays light.

``planner.batch=true`` sends the stage's requests through the OpenAI Batch API instead (half
price, answered within 24 h; :mod:`omnistory_core.kit.batches`): the same request bodies, so the
same cache keys; a re-run polls the batches it submitted.
"""

from __future__ import annotations

from typing import Any

from omnistory_core.api import Param, with_defaults
from omnistory_core.kit.batches import batch_parameters
from omnistory_core.kit.planning.base import BASE_PARAMETERS
from omnistory_core.kit.planning.openai_chat import OpenAIChatPlanner

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
VERBOSITIES = ("low", "medium", "high")
IMAGE_DETAILS = ("low", "high", "auto")


class GPTPlanner(OpenAIChatPlanner):
    """OpenAI Chat Completions planner with JSON-schema structured output."""

    name = "gpt"
    version = "1"
    description = "GPT-5.4 via the OpenAI SDK: image as data URL, Plan schema as response_format"
    max_tokens_field = "max_completion_tokens"  # includes reasoning tokens on reasoning models
    api_key_hint = "your OpenAI API key"
    batch_provider = "openai"
    parameters = with_defaults(
        BASE_PARAMETERS,
        Param(
            "reasoning_effort", str, None, "null: the model's default", choices=REASONING_EFFORTS
        ),
        Param("verbosity", str, None, "null: the model's default", choices=VERBOSITIES),
        Param(
            "image_detail", str, None, "image_url detail; null: the API's", choices=IMAGE_DETAILS
        ),
        Param("structured_output", bool, True, "send the Plan schema as response_format (strict)"),
        *batch_parameters("openai"),
        model="gpt-5.4",
        base_url=None,  # the SDK default: https://api.openai.com/v1, or $OPENAI_BASE_URL
        api_key_env="OPENAI_API_KEY",
        max_concurrency=8,
        timeout_s=180.0,
        max_retries=5,
        prices={"gpt-5.4": {"input_per_mtok": None, "output_per_mtok": None}},
        max_tokens=4096,
    )

    def message_options(self) -> dict[str, Any]:
        return {"image_detail": self.params["image_detail"]}

    def response_format(self) -> dict[str, Any] | None:
        return super().response_format() if self.params["structured_output"] else None

    def extra_request_kwargs(self) -> dict[str, Any]:
        keys = ("reasoning_effort", "verbosity")
        return {k: self.params[k] for k in keys if self.params[k] is not None}
