"""``planner=glm|internvl|qwen35``: open VLMs behind a vLLM OpenAI-compatible server.

The OpenAI SDK talks to the server (``planner.base_url``, or a server this planner starts with
``planner.launch=true``); sending, error classification, retries and usage are
:class:`~omnistory_core.kit.planning.openai_chat.OpenAIChatPlanner`'s.  Structured output goes
through ``response_format`` with the Plan JSON schema: the legacy ``guided_json`` request field
was removed from vLLM (v0.12) and current servers accept it silently and return unconstrained
text, so it is never sent.  Per-model chat template switches (thinking off for Qwen3.5 and GLM-4.6V)
travel as ``chat_template_kwargs``.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from omnistory_core.api import ComponentError, Param, plan_response_format, with_defaults
from omnistory_core.kit.planning.base import BASE_PARAMETERS
from omnistory_core.kit.planning.openai_chat import OpenAIChatPlanner
from omnistory_vllm.launcher import LaunchError, VLLMServer

LAUNCH_PARAMS = (
    "launch",
    "launch_executable",
    "launch_args",
    "launch_host",
    "launch_port",
    "launch_timeout_s",
    "launch_log",
)

VLLM_PARAMETERS = with_defaults(
    BASE_PARAMETERS,
    Param(
        "schema_patterns",
        bool,
        True,
        "send the schema's non-blank `pattern` rules (false if the server's grammar backend"
        " rejects them; parse_plan enforces them either way)",
    ),
    Param("chat_template_kwargs", dict, {}, "sent as chat_template_kwargs"),
    Param(
        "launch",
        bool,
        False,
        "start `vllm serve <model> --host <launch_host> --port <launch_port> <launch_args...>`"
        " on the first call, wait for /health, stop it after the planner stage and at exit",
        runtime=True,
    ),
    Param(
        "launch_executable",
        (str, list),
        "vllm",
        "program, or argv prefix (e.g. [/opt/vllm-env/bin/python, -m, vllm.entrypoints.cli.main])",
        runtime=True,
    ),
    Param("launch_args", list, [], "arguments after `vllm serve <model>`", runtime=True),
    Param("launch_host", str, "127.0.0.1", "host of a launched server", runtime=True),
    Param(
        "launch_port",
        int,
        None,
        "port of a launched server; null: any free port",
        runtime=True,
        ge=1,
        le=65535,
    ),
    Param(
        "launch_timeout_s",
        float,
        1800.0,
        "seconds to wait for a launched server's /health",
        runtime=True,
        gt=0,
    ),
    Param(
        "launch_log",
        str,
        None,
        "server log file; null: <tmp>/omnistory-vllm-<model>-<port>.log",
        runtime=True,
    ),
    base_url="http://127.0.0.1:8000/v1",  # the server's URL (ignored with launch: true)
    api_key_env=None,  # for a server started with --api-key
    max_concurrency=16,
    timeout_s=300.0,
    temperature=0.0,  # greedy (the server's generation_config would otherwise apply)
)


class VLLMPlanner(OpenAIChatPlanner):
    """Base of the vLLM planners; subclasses set ``name`` and their defaults."""

    api_key_required = False  # a server started without --api-key needs none
    parameters = VLLM_PARAMETERS

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._server: VLLMServer | None = None
        self._launch_error: str | None = None

    def _check_params(self) -> None:
        super()._check_params()
        p = self.params
        exe = p["launch_executable"]
        if isinstance(exe, list) and not (exe and all(isinstance(a, str) for a in exe)):
            raise self._bad("launch_executable", "a program name/path or a list of strings")
        if not isinstance(exe, list) and not exe:
            raise self._bad("launch_executable", "a program name/path or a list of strings")
        if not p["launch"] and not p["base_url"]:
            raise self._bad(
                "base_url",
                "the server's URL (e.g. http://127.0.0.1:8000/v1) unless planner.launch=true",
            )

    # -- server ------------------------------------------------------------------------------
    def _start_server(self) -> str:
        """Start the server once; a failed start is remembered so items fail fast."""
        if self._launch_error is not None:
            raise ComponentError(self._launch_error, category="model_error")
        if self._server is None or not self._server.running:
            p = self.params
            server = VLLMServer(
                model=self.model,
                executable=p["launch_executable"],
                host=p["launch_host"],
                port=p["launch_port"],
                args=list(p["launch_args"]),
                timeout_s=float(p["launch_timeout_s"]),
                log_path=p["launch_log"],
            )
            try:
                server.start()
            except LaunchError as exc:
                self._launch_error = f"planner={self.name}: vLLM server did not start: {exc}"
                raise ComponentError(self._launch_error, category="model_error") from exc
            self._server = server
        return self._server.base_url

    def gpus(self) -> int:
        """GPUs one replica needs: a server it starts gets tensor x pipeline parallel GPUs (from
        ``launch_args``); a server running elsewhere needs none here."""
        if not self.params.get("launch"):
            return 0
        return parallel_size(list(self.params.get("launch_args") or []))

    @property
    def server(self) -> VLLMServer | None:
        """The server this planner started (``planner.launch=true``), if any."""
        return self._server

    def preflight(self) -> None:
        """Before any example: the SDK is installed and, with ``launch``, vLLM can be started.
        (Whether a running server answers shows on the first call: the key is optional.)"""
        super().preflight()
        exe = self.params["launch_executable"]
        if self.params["launch"] and isinstance(exe, str):
            if shutil.which(exe) is None and not os.access(exe, os.X_OK):
                raise ComponentError(
                    f"planner.launch=true but the vLLM executable {exe!r} is not found: install"
                    " vLLM (pip install vllm), set planner.launch_executable, or point"
                    " planner.base_url at a running server with planner.launch=false"
                )

    def client_base_url(self) -> str | None:
        return self._start_server() if self.params["launch"] else self.params["base_url"]

    def unload(self) -> None:
        super().unload()
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    # -- request -----------------------------------------------------------------------------
    def response_format(self) -> dict[str, Any]:
        """The Plan schema as ``response_format``; ``schema_patterns: false`` drops the
        non-blank ``pattern`` rules for grammar backends that reject them (``parse_plan``
        still enforces them)."""
        fmt = plan_response_format()
        if not self.params["schema_patterns"]:
            fmt["json_schema"]["schema"] = _drop_key(fmt["json_schema"]["schema"], "pattern")
        return fmt

    def extra_request_kwargs(self) -> dict[str, Any]:
        template_kwargs = dict(self.params["chat_template_kwargs"])
        return {"extra_body": {"chat_template_kwargs": template_kwargs}} if template_kwargs else {}


def parallel_size(args: list[str]) -> int:
    """GPUs ``vllm serve`` uses with these arguments: tensor x pipeline parallel size."""
    sizes = {"tensor": 1, "pipeline": 1}
    names = {
        "--tensor-parallel-size": "tensor",
        "-tp": "tensor",
        "--pipeline-parallel-size": "pipeline",
        "-pp": "pipeline",
    }
    for i, arg in enumerate(args):
        name, eq, value = str(arg).partition("=")
        if name in names:
            raw = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            try:
                sizes[names[name]] = max(1, int(raw))
            except ValueError:
                pass  # vLLM itself says what is wrong with it
    return sizes["tensor"] * sizes["pipeline"]


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
    parameters = with_defaults(
        VLLM_PARAMETERS,
        model="zai-org/GLM-4.6V",
        chat_template_kwargs={"enable_thinking": False},
        # BF16 needs about 4 x H100/H200 (hence tensor parallel 4); GLM-4.6V-FP8 needs less
        launch_args=[
            "--trust-remote-code",
            "--tensor-parallel-size",
            "4",
            "--enable-expert-parallel",
            "--reasoning-parser",
            "glm45",
            "--mm-encoder-tp-mode",
            "data",
        ],
    )


class InternVLPlanner(VLLMPlanner):
    """InternVL3.5-4B served by vLLM (remote code; thinking is off unless prompted for)."""

    name = "internvl"
    version = "1"
    description = "OpenGVLab/InternVL3_5-4B on a vLLM server (response_format json_schema)"
    parameters = with_defaults(
        VLLM_PARAMETERS,
        model="OpenGVLab/InternVL3_5-4B",
        launch_args=["--trust-remote-code"],
    )


class Qwen35Planner(VLLMPlanner):
    """Qwen3.5-4B served by vLLM; its default thinking mode is switched off."""

    name = "qwen35"
    version = "1"
    description = "Qwen/Qwen3.5-4B on a vLLM server (response_format json_schema, no thinking)"
    parameters = with_defaults(
        VLLM_PARAMETERS,
        model="Qwen/Qwen3.5-4B",
        chat_template_kwargs={"enable_thinking": False},
        launch_args=["--reasoning-parser", "qwen3"],
    )


__all__ = ["GLMPlanner", "InternVLPlanner", "LAUNCH_PARAMS", "Qwen35Planner", "VLLMPlanner"]
