"""`OpenAIChatPlanner`: a planner talking to an OpenAI-compatible Chat Completions endpoint.

The OpenAI API (``planner=gpt``) and vLLM's server (``planner=glm|internvl|qwen35``) speak the
same protocol, so one class owns what they share: the SDK client (its own retries off: the
retries are :class:`~omnistory_core.kit.planning.base.VLMPlanner`'s,
:mod:`omnistory_core.kit.retry`),
the request (``model``, messages with the page image as a ``data:`` URL, the token limit, seed,
sampling, the Plan JSON schema as ``response_format``), sending it, reading text and usage from
the answer, and classifying the SDK's errors.  A subclass sets its parameters and overrides the
hooks where its server differs:

* :attr:`max_tokens_field`: ``max_completion_tokens`` (OpenAI) or ``max_tokens`` (vLLM);
* :meth:`client_base_url`: where the client connects (a server the planner starts, say);
* :meth:`response_format`: the structured-output schema, or ``None`` to send none;
* :meth:`extra_request_kwargs`: the server's own request fields;
* :meth:`message_options`: options of :func:`~omnistory_core.kit.planning.messages.
  openai_chat_messages` (``image_detail``).

For ``batch=true`` (a subclass that sets ``batch_provider = "openai"`` and declares the batch
parameters, ``planner=gpt``) the same request goes as a line of an OpenAI Batch API file
(:meth:`batch_body`: the request's JSON body, ``extra_body`` merged in as the SDK sends it).

The ``openai`` package is imported only when a client is made or an error classified, so plugin
discovery stays light and a missing SDK shows up as a clear error (see :meth:`preflight`).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, ClassVar

from omnistory_core.components import ComponentError
from omnistory_core.kit.planning.base import VLMPlanner
from omnistory_core.kit.planning.messages import PlannerRequest, openai_chat_messages
from omnistory_core.kit.planning.replies import ModelReply, reply_from_chat_completion
from omnistory_core.kit.retry import ErrorInfo, classify_api_error

#: the ``openai`` SDK versions this class is written against
OPENAI_REQUIREMENT = "openai>=3.57,<4"
#: sent as the key when none is configured and none is required (vLLM checks none by default)
NO_KEY = "EMPTY"


class OpenAIChatPlanner(VLMPlanner):
    """Base of the planners behind an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    requirements: ClassVar[tuple[str, ...]] = (OPENAI_REQUIREMENT,)
    #: the request field carrying the ``max_tokens`` parameter
    max_tokens_field: ClassVar[str] = "max_tokens"
    #: what the preflight error tells a user who has no key (``None``: no key is needed)
    api_key_hint: ClassVar[str | None] = "your API key"

    # -- preflight and client --------------------------------------------------------------------
    def preflight(self) -> None:
        """Before any example: the SDK is installed and, where a key is required, its variable
        is set."""
        if importlib.util.find_spec("openai") is None:
            raise ComponentError(
                f"the openai package is not installed: pip install '{self.requirements[0]}'"
            )
        name = self.params["api_key_env"]
        if self.api_key_required and not (name and os.environ.get(name)):
            raise ComponentError(
                f"no API key: environment variable {name} is not set (planner.api_key_env names"
                f" it); export {name}=<{self.api_key_hint}>, or choose another planner"
            )

    def client_base_url(self) -> str | None:
        """The URL the client connects to (``planner.base_url``; null: the SDK's default)."""
        return self.params["base_url"] or None

    def make_client(self, api_key: str | None) -> Any:
        import openai

        return openai.OpenAI(
            api_key=api_key or NO_KEY,  # the SDK insists on a key; only a required one is real
            base_url=self.client_base_url(),
            timeout=float(self.params["timeout_s"]),
            max_retries=0,  # retries (with Retry-After) are VLMPlanner's
        )

    # -- request -----------------------------------------------------------------------------
    def message_options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`openai_chat_messages` (none by default)."""
        return {}

    def response_format(self) -> dict[str, Any] | None:
        """The Plan JSON schema as a strict ``json_schema`` ``response_format``."""
        from omnistory_core.plan_schema import plan_response_format

        return plan_response_format()

    def extra_request_kwargs(self) -> dict[str, Any]:
        """Request fields of this server beyond the common ones (none by default)."""
        return {}

    def request_kwargs(self, request: PlannerRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for one request."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": openai_chat_messages(request, **self.message_options()),
            self.max_tokens_field: int(self.params["max_tokens"]),
            "seed": int(self.params["seed"]),
            **self.sampling_params(),
        }
        response_format = self.response_format()
        if response_format is not None:
            kwargs["response_format"] = response_format
        kwargs.update(self.extra_request_kwargs())
        return kwargs

    # -- call ----------------------------------------------------------------------------------
    def send(self, client: Any, request: PlannerRequest) -> ModelReply:
        """One Chat Completions call; text, token counts, reasoning tokens and truncation."""
        response = client.chat.completions.create(**self.request_kwargs(request))
        return reply_from_chat_completion(response)

    def batch_body(self, request: PlannerRequest) -> dict[str, Any]:
        """The JSON body ``chat.completions.create`` would send: ``extra_body`` merged in."""
        kwargs = self.request_kwargs(request)
        extra = kwargs.pop("extra_body", None) or {}
        return {**kwargs, **extra}

    def batch_reply(self, response: Any) -> ModelReply:
        return reply_from_chat_completion(response)

    def classify_error(self, exc: BaseException) -> ErrorInfo:
        """The shared classification with the SDK's timeout and connection error types."""
        import openai

        return classify_api_error(
            exc,
            timeout_types=(openai.APITimeoutError,),
            connection_types=(openai.APIConnectionError,),
        )


__all__ = ["NO_KEY", "OPENAI_REQUIREMENT", "OpenAIChatPlanner"]
