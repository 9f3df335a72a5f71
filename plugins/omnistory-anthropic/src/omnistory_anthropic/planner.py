"""``planner=claude``: Claude Opus 4.7 through the Anthropic Python SDK (Messages API).

The page image goes as a base64 image block before the text.  The Plan JSON schema is requested
as structured output (``output_config.format``, GA in the SDK this plugin requires) or, with
``structured_output: tool``, through forced use of one strict tool whose input schema is the
plan.  The SDK is imported in :meth:`make_client` only.

``planner.batch=true`` sends the stage's requests as Anthropic Message Batches instead (half
price, answered within 24 h; :mod:`omnistory_core.kit.batches`): the same ``messages.create``
parameters, so the same cache keys; a re-run polls the batches it submitted.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar

from omnistory_core.api import ComponentError, Param, plan_response_format, with_defaults
from omnistory_core.kit.batches import batch_parameters
from omnistory_core.kit.planning.base import BASE_PARAMETERS, VLMPlanner
from omnistory_core.kit.planning.messages import PlannerRequest, anthropic_messages
from omnistory_core.kit.planning.replies import ModelReply, reply_from_anthropic_message
from omnistory_core.kit.retry import ErrorInfo, classify_api_error

STRUCTURED_OUTPUT_MODES = ("json_schema", "tool", "none")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
TOOL_NAME = "write_plan"


@lru_cache(maxsize=1)
def _claude_plan_schema_json() -> str:
    import json

    import anthropic

    schema = plan_response_format()["json_schema"]["schema"]  # without $schema / $id
    # `pattern` (the non-blank rule) is outside the structured-output subset: the SDK's own
    # transform would only move it into the description, as text for the model to read.
    # parse_plan enforces the rule anyway, so it is dropped here.
    return json.dumps(anthropic.transform_schema(_drop_key(schema, "pattern")))


def claude_plan_schema() -> dict[str, Any]:
    """The Plan schema as Claude's structured outputs accept it (SDK ``transform_schema``)."""
    import json

    return json.loads(_claude_plan_schema_json())


def _drop_key(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return {k: _drop_key(v, key) for k, v in value.items() if k != key}
    if isinstance(value, list):
        return [_drop_key(v, key) for v in value]
    return value


def normalize_base_url(url: str | None) -> str | None:
    """The SDK appends ``/v1/messages``: a base URL ending in ``/v1`` would double it."""
    if not url:
        return None
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class ClaudePlanner(VLMPlanner):
    """Anthropic Messages planner with JSON-schema output (or forced tool use)."""

    name = "claude"
    version = "1"
    description = "Claude Opus 4.7 via the Anthropic SDK: base64 image block, Plan JSON schema"
    requirements: ClassVar[tuple[str, ...]] = ("anthropic>=2.14,<3",)
    batch_provider = "anthropic"
    parameters = with_defaults(
        BASE_PARAMETERS,
        Param(
            "structured_output",
            str,
            "json_schema",
            "json_schema: output_config.format (structured outputs) | tool: forced tool use with"
            " the schema as strict input_schema | none: prompt only",
            choices=STRUCTURED_OUTPUT_MODES,
        ),
        Param(
            "effort", str, None, "output_config.effort; null: the model's default", choices=EFFORTS
        ),
        *batch_parameters("anthropic"),
        model="claude-opus-4-7",
        # null: the SDK default (https://api.anthropic.com, or $ANTHROPIC_BASE_URL); a trailing
        # /v1 is dropped (the SDK appends /v1/messages itself)
        base_url=None,
        api_key_env="ANTHROPIC_API_KEY",
        max_concurrency=8,
        timeout_s=180.0,
        max_retries=5,
        prices={"claude-opus-4-7": {"input_per_mtok": None, "output_per_mtok": None}},
    )

    def preflight(self) -> None:
        """Before any example: the SDK is installed and the key's variable is set."""
        import importlib.util
        import os

        if importlib.util.find_spec("anthropic") is None:
            raise ComponentError(
                f"the anthropic package is not installed: pip install '{self.requirements[0]}'"
            )
        name = self.params["api_key_env"]
        if not (name and os.environ.get(name)):
            raise ComponentError(
                f"no API key: environment variable {name} is not set (planner.api_key_env names"
                f" it); export {name}=<your Anthropic API key>, or choose another planner"
            )

    def make_client(self, api_key: str | None) -> Any:
        import anthropic

        return anthropic.Anthropic(
            api_key=api_key,
            base_url=normalize_base_url(self.params["base_url"]),
            timeout=float(self.params["timeout_s"]),
            max_retries=0,  # retries (with Retry-After) are VLMPlanner's
        )

    def request_kwargs(self, request: PlannerRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for one request."""
        system, messages = anthropic_messages(request)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": int(self.params["max_tokens"]),
            "system": system,
            "messages": messages,
            **self.sampling_params(),
        }
        output_config: dict[str, Any] = {}
        mode = self.params["structured_output"]
        if mode == "json_schema":
            output_config["format"] = {"type": "json_schema", "schema": claude_plan_schema()}
        elif mode == "tool":
            kwargs["tools"] = [
                {
                    "name": TOOL_NAME,
                    "description": "Write the plan of the next page (narration, image prompt, "
                    "speech).",
                    "input_schema": claude_plan_schema(),
                    "strict": True,
                }
            ]
            kwargs["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
        if self.params["effort"] is not None:
            output_config["effort"] = self.params["effort"]
        if output_config:
            kwargs["output_config"] = output_config
        return kwargs

    def send(self, client: Any, request: PlannerRequest) -> ModelReply:
        return self.batch_reply(client.messages.create(**self.request_kwargs(request)))

    def batch_body(self, request: PlannerRequest) -> dict[str, Any]:
        """A Message Batch request's ``params``: what ``messages.create`` sends."""
        return self.request_kwargs(request)

    def batch_reply(self, response: Any) -> ModelReply:
        tool = TOOL_NAME if self.params["structured_output"] == "tool" else None
        return reply_from_anthropic_message(response, tool_name=tool)

    def classify_error(self, exc: BaseException) -> ErrorInfo:
        import anthropic

        return classify_api_error(
            exc,
            timeout_types=(anthropic.APITimeoutError,),
            connection_types=(anthropic.APIConnectionError,),
        )
