"""``planner=glm|internvl|qwen35``: open VLMs behind a vLLM OpenAI-compatible server.

The OpenAI SDK talks to the server (``planner.base_url``, or a server this planner starts with
``planner.launch=true``).  Structured output goes through ``response_format`` with the Plan JSON
schema: the legacy ``guided_json`` request field was removed from vLLM (v0.12) and current
servers accept it silently and return unconstrained text, so it is never sent.  Per-model chat
template switches (thinking off for Qwen3.5 and GLM-4.6V) travel as ``chat_template_kwargs``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from omnistory_core.components import ComponentError
from omnistory_core.planning.base import BASE_DEFAULTS, BASE_RUNTIME, VLMPlanner
from omnistory_core.planning.messages import PlannerRequest, openai_chat_messages
from omnistory_core.planning.replies import ModelReply, reply_from_chat_completion
from omnistory_core.planning.retry import ErrorInfo, classify_api_error
from omnistory_vllm.launcher import LaunchError, VLLMServer

LAUNCH_PARAMS = ("launch", "launch_executable", "launch_args", "launch_host", "launch_port",
                 "launch_timeout_s", "launch_log")


class VLLMPlanner(VLMPlanner):
    """Base of the vLLM planners; subclasses set ``name`` and their defaults."""

    requirements: ClassVar[tuple[str, ...]] = ("openai>=3.57,<4",)
    api_key_required = False  # a server started without --api-key needs none
    runtime_params: ClassVar[tuple[str, ...]] = BASE_RUNTIME + LAUNCH_PARAMS
    param_defaults: ClassVar[dict[str, Any]] = {
        **BASE_DEFAULTS,
        "base_url": "http://127.0.0.1:8000/v1",
        "max_concurrency": 16,
        "timeout_s": 300.0,
        "temperature": 0.0,
        "chat_template_kwargs": {},
        "schema_patterns": True,
        "launch": False,
        "launch_executable": "vllm",
        "launch_args": [],
        "launch_host": "127.0.0.1",
        "launch_port": None,
        "launch_timeout_s": 1800.0,
        "launch_log": None,
    }

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._server: VLLMServer | None = None
        self._launch_error: str | None = None

    def _check_params(self) -> None:
        super()._check_params()
        p = self.params
        if not isinstance(p["chat_template_kwargs"], dict):
            raise self._bad("chat_template_kwargs", "a mapping")
        if not isinstance(p["schema_patterns"], bool):
            raise self._bad("schema_patterns", "true or false")
        if not isinstance(p["launch"], bool):
            raise self._bad("launch", "true or false")
        exe = p["launch_executable"]
        if not (isinstance(exe, str) and exe) and not (
            isinstance(exe, list) and exe and all(isinstance(a, str) for a in exe)
        ):
            raise self._bad("launch_executable", "a program name/path or a list of strings")
        if not isinstance(p["launch_args"], list):
            raise self._bad("launch_args", "a list of command-line arguments")
        port = p["launch_port"]
        if port is not None and (isinstance(port, bool) or not isinstance(port, int)
                                 or not 0 < port < 65536):
            raise self._bad("launch_port", "null (any free port) or a TCP port number")
        if isinstance(p["launch_timeout_s"], bool) or not isinstance(
            p["launch_timeout_s"], int | float
        ) or p["launch_timeout_s"] <= 0:
            raise self._bad("launch_timeout_s", "a number > 0")
        if not p["launch"] and not p["base_url"]:
            raise self._bad("base_url", "the server's URL (e.g. http://127.0.0.1:8000/v1) "
                                        "unless planner.launch=true")

    # -- server ------------------------------------------------------------------------------
    def _start_server(self) -> str:
        """Start the server once; a failed start is remembered so items fail fast."""
        if self._launch_error is not None:
            raise ComponentError(self._launch_error, category="model_error")
        if self._server is None or not self._server.running:
            p = self.params
            server = VLLMServer(
                model=self.model, executable=p["launch_executable"], host=p["launch_host"],
                port=p["launch_port"], args=list(p["launch_args"]),
                timeout_s=float(p["launch_timeout_s"]), log_path=p["launch_log"],
            )
            try:
                server.start()
            except LaunchError as exc:
                self._launch_error = f"planner={self.name}: vLLM server did not start: {exc}"
                raise ComponentError(self._launch_error, category="model_error") from exc
            self._server = server
        return self._server.base_url

    @property
    def server(self) -> VLLMServer | None:
        """The server this planner started (``planner.launch=true``), if any."""
        return self._server

    def preflight(self) -> None:
        """Before any example: the SDK is installed and, with ``launch``, vLLM can be started.
        (Whether a running server answers shows on the first call: the key is optional.)"""
        import importlib.util
        import os
        import shutil

        if importlib.util.find_spec("openai") is None:
            raise ComponentError(
                f"the openai package is not installed: pip install '{self.requirements[0]}'"
            )
        exe = self.params["launch_executable"]
        if self.params["launch"] and isinstance(exe, str):
            if shutil.which(exe) is None and not os.access(exe, os.X_OK):
                raise ComponentError(
                    f"planner.launch=true but the vLLM executable {exe!r} is not found: install"
                    " vLLM (pip install vllm), set planner.launch_executable, or point"
                    " planner.base_url at a running server with planner.launch=false"
                )

    def make_client(self, api_key: str | None) -> Any:
        import openai

        base_url = self._start_server() if self.params["launch"] else self.params["base_url"]
        return openai.OpenAI(
            api_key=api_key or "EMPTY",  # the SDK insists on a key; vLLM ignores it by default
            base_url=base_url,
            timeout=float(self.params["timeout_s"]),
            max_retries=0,  # retries (with Retry-After) are VLMPlanner's
        )

    def unload(self) -> None:
        super().unload()
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    # -- calls -------------------------------------------------------------------------------
    def request_kwargs(self, request: PlannerRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for one request."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": openai_chat_messages(request),
            "max_tokens": int(self.params["max_tokens"]),
            "seed": int(self.params["seed"]),
            "response_format": self.response_format(),
            **self.sampling_params(),
        }
        if self.params["chat_template_kwargs"]:
            template_kwargs = dict(self.params["chat_template_kwargs"])
            kwargs["extra_body"] = {"chat_template_kwargs": template_kwargs}
        return kwargs

    def response_format(self) -> dict[str, Any]:
        """The Plan schema as ``response_format``; ``schema_patterns: false`` drops the
        non-blank ``pattern`` rules for grammar backends that reject them (``parse_plan``
        still enforces them)."""
        from omnistory_core.plan_schema import plan_response_format

        fmt = plan_response_format()
        if not self.params["schema_patterns"]:
            fmt["json_schema"]["schema"] = _drop_key(fmt["json_schema"]["schema"], "pattern")
        return fmt

    def send(self, client: Any, request: PlannerRequest) -> ModelReply:
        response = client.chat.completions.create(**self.request_kwargs(request))
        return reply_from_chat_completion(response)

    def classify_error(self, exc: BaseException) -> ErrorInfo:
        import openai

        return classify_api_error(exc, timeout_types=(openai.APITimeoutError,),
                                  connection_types=(openai.APIConnectionError,))


def _drop_key(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return {k: _drop_key(v, key) for k, v in value.items() if k != key}
    if isinstance(value, list):
        return [_drop_key(v, key) for v in value]
    return value


class GLMPlanner(VLLMPlanner):
    """GLM-4.6V (106B MoE) served by vLLM; thinking off through the chat template."""

    name = "glm"
    version = "1"
    description = "zai-org/GLM-4.6V on a vLLM server (response_format json_schema)"
    param_defaults: ClassVar[dict[str, Any]] = {
        **VLLMPlanner.param_defaults,
        "model": "zai-org/GLM-4.6V",
        "chat_template_kwargs": {"enable_thinking": False},
    }


class InternVLPlanner(VLLMPlanner):
    """InternVL3.5-4B served by vLLM (remote code; thinking is off unless prompted for)."""

    name = "internvl"
    version = "1"
    description = "OpenGVLab/InternVL3_5-4B on a vLLM server (response_format json_schema)"
    param_defaults: ClassVar[dict[str, Any]] = {
        **VLLMPlanner.param_defaults,
        "model": "OpenGVLab/InternVL3_5-4B",
    }


class Qwen35Planner(VLLMPlanner):
    """Qwen3.5-4B served by vLLM; its default thinking mode is switched off."""

    name = "qwen35"
    version = "1"
    description = "Qwen/Qwen3.5-4B on a vLLM server (response_format json_schema, no thinking)"
    param_defaults: ClassVar[dict[str, Any]] = {
        **VLLMPlanner.param_defaults,
        "model": "Qwen/Qwen3.5-4B",
        "chat_template_kwargs": {"enable_thinking": False},
    }
