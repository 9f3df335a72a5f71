"""``planner=gpt``: GPT-5.4 through the OpenAI Python SDK (Chat Completions).

The page image goes as a base64 ``data:`` URL, the Plan JSON schema as a strict ``json_schema``
``response_format``.  The SDK is imported in :meth:`make_client` only, so plugin discovery stays
light and a missing SDK shows up as a clear per-item failure.
"""

from __future__ import annotations

from typing import Any, ClassVar

from omnistory_core.components import ComponentError
from omnistory_core.planning.base import BASE_DEFAULTS, BASE_RUNTIME, VLMPlanner
from omnistory_core.planning.messages import PlannerRequest, openai_chat_messages
from omnistory_core.planning.replies import ModelReply, reply_from_chat_completion
from omnistory_core.planning.retry import ErrorInfo, classify_api_error

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
VERBOSITIES = ("low", "medium", "high")
IMAGE_DETAILS = ("low", "high", "auto")


class GPTPlanner(VLMPlanner):
    """OpenAI Chat Completions planner with JSON-schema structured output."""

    name = "gpt"
    version = "1"
    description = "GPT-5.4 via the OpenAI SDK: image as data URL, Plan schema as response_format"
    requirements: ClassVar[tuple[str, ...]] = ("openai>=3.57,<4",)
    runtime_params: ClassVar[tuple[str, ...]] = BASE_RUNTIME
    param_defaults: ClassVar[dict[str, Any]] = {
        **BASE_DEFAULTS,
        "model": "gpt-5.4",
        "api_key_env": "OPENAI_API_KEY",
        "max_tokens": 4096,
        "reasoning_effort": None,
        "verbosity": None,
        "image_detail": None,
        "structured_output": True,
    }

    def _check_params(self) -> None:
        super()._check_params()
        for key, allowed in (("reasoning_effort", REASONING_EFFORTS), ("verbosity", VERBOSITIES),
                             ("image_detail", IMAGE_DETAILS)):
            value = self.params[key]
            if value is not None and value not in allowed:
                raise self._bad(key, f"null or one of {', '.join(allowed)}")
        if not isinstance(self.params["structured_output"], bool):
            raise self._bad("structured_output", "true or false")

    def preflight(self) -> None:
        """Before any example: the SDK is installed and the key's variable is set."""
        import importlib.util
        import os

        if importlib.util.find_spec("openai") is None:
            raise ComponentError(
                f"the openai package is not installed: pip install '{self.requirements[0]}'"
            )
        name = self.params["api_key_env"]
        if not (name and os.environ.get(name)):
            raise ComponentError(
                f"no API key: environment variable {name} is not set (planner.api_key_env names"
                f" it); export {name}=<your OpenAI API key>, or choose another planner"
            )

    def make_client(self, api_key: str | None) -> Any:
        import openai

        return openai.OpenAI(
            api_key=api_key,
            base_url=self.params["base_url"] or None,
            timeout=float(self.params["timeout_s"]),
            max_retries=0,  # retries (with Retry-After) are VLMPlanner's
        )

    def request_kwargs(self, request: PlannerRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for one request."""
        from omnistory_core.plan_schema import plan_response_format

        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": openai_chat_messages(request, image_detail=self.params["image_detail"]),
            "max_completion_tokens": int(self.params["max_tokens"]),
            "seed": int(self.params["seed"]),
            **self.sampling_params(),
        }
        if self.params["structured_output"]:
            kwargs["response_format"] = plan_response_format()
        for key in ("reasoning_effort", "verbosity"):
            if self.params[key] is not None:
                kwargs[key] = self.params[key]
        return kwargs

    def send(self, client: Any, request: PlannerRequest) -> ModelReply:
        response = client.chat.completions.create(**self.request_kwargs(request))
        return reply_from_chat_completion(response)

    def classify_error(self, exc: BaseException) -> ErrorInfo:
        import openai

        return classify_api_error(exc, timeout_types=(openai.APITimeoutError,),
                                  connection_types=(openai.APIConnectionError,))
