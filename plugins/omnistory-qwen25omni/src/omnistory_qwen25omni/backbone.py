"""``backbone=qwen25omni``: Qwen2.5-Omni-7B as a semi-orchestration T+S backbone.

Per example, inside one ``run_one`` (one cached record):

1. pass 1 -- one short line of dialogue and its speech (24 kHz); if the model gives the line but
   no audio, forced speech (transformers backend only) makes the talker voice exactly that line;
2. pass 2 -- the next page as JSON ``{text, t2i}``, given the line as text and as audio, without
   speech output.

The narration is pass 2's ``text``; ``plan={"image_prompt": t2i}`` goes to the image expert.  A
pass 1 without a usable line fails the whole example; a pass 2 without usable JSON fails the text
(and so the image, whose prompt is missing) while the pass-1 speech survives.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

from omnistory_core.api import (
    Audio,
    Backbone,
    BackboneOutput,
    ComponentError,
    Failure,
    Media,
    Param,
    ParamError,
)
from omnistory_core.kit.diffusion import DTYPE_NAMES, item_seed
from omnistory_qwen25omni.prompts import extract_quote, parse_page, pass1_messages, pass2_messages
from omnistory_qwen25omni.replies import Reply, Speech

OWNER = "backbone=qwen25omni"
BACKENDS = ("transformers", "vllm_omni")
ATTENTION = ("flash_attention_2", "sdpa", "eager")
DTYPES = ("auto", "bfloat16", "float16", "float32")

#: the official environment (root runner of the benchmark's code) where it matters to this model
QWEN25OMNI_REQUIREMENTS: tuple[str, ...] = (
    "transformers==4.57.6",
    "torch==2.10.0",
    "accelerate>=1.0",
    "soundfile>=0.12",
    "librosa>=0.10",
    "numpy>=1.24",
    "pillow>=10",
    "openai>=3.57,<4",
)

PARAMETERS: tuple[Param, ...] = (
    # -- output-changing (cache key) --
    Param(
        "model",
        str,
        "Qwen/Qwen2.5-Omni-7B",
        "hub id or local directory (with spk_dict.pt)",
        weights=True,
    ),
    Param("revision", str, None, "hub revision (branch, tag or commit); null: default branch"),
    Param(
        "backend",
        str,
        "transformers",
        "transformers (in this process) | vllm_omni (a vLLM-Omni server at base_url)",
        choices=BACKENDS,
    ),
    Param("dtype", str, "auto", "auto (the checkpoint's: bfloat16) | bfloat16 | float16 | float32"),
    Param(
        "attn_implementation",
        str,
        "flash_attention_2",
        "as the official runner; sdpa without CUDA or flash-attn (recorded in usage)",
        choices=ATTENTION,
    ),
    Param("speaker", str, None, "null: the default voice (Chelsie) | Ethan (transformers only)"),
    Param("thinker_max_new_tokens", int, None, "null: the model's default (1024)", ge=1),
    Param("talker_max_new_tokens", int, None, "null: the model's default (4096)", ge=1),
    # -- runtime only --
    Param("device", str, "auto", "auto (cuda when visible) | cpu | cuda:N", runtime=True),
    Param("base_url", (str, None), "http://127.0.0.1:8091/v1", "vllm_omni server", runtime=True),
    Param("served_model_name", str, None, "the server's model name; null: `model`", runtime=True),
    Param(
        "api_key_env",
        str,
        None,
        "NAME of the environment variable with the server's key; null: none",
        runtime=True,
    ),
    Param("timeout_s", float, 600.0, "per request (seconds)", runtime=True, gt=0),
    Param("max_retries", int, 2, "retries of a request", runtime=True, ge=0),
    Param("max_concurrency", int, 4, "examples in flight against the server", runtime=True, ge=1),
    Param("launch", bool, False, "start the vLLM-Omni server on the first call", runtime=True),
    Param(
        "launch_executable",
        (str, list),
        "vllm",
        "program, or argv prefix ([python, -m, vllm_omni.entrypoints.cli.main])",
        runtime=True,
    ),
    Param("launch_args", list, [], "extra arguments of `serve`", runtime=True),
    Param("launch_host", str, "127.0.0.1", "host the launched server binds", runtime=True),
    Param("launch_port", int, None, "null: any free port", runtime=True, ge=1, le=65535),
    Param("launch_timeout_s", float, 1800.0, "seconds to wait for /health", runtime=True, gt=0),
    Param("launch_log", str, None, "server log; null: a file in the temp directory", runtime=True),
)
DEFAULTS: dict[str, Any] = {p.name: p.default for p in PARAMETERS}
RUNTIME_PARAMS: tuple[str, ...] = tuple(p.name for p in PARAMETERS if p.runtime)


@dataclass(frozen=True)
class Settings:
    model: str
    revision: str | None
    backend: str
    dtype: str
    attn_implementation: str
    speaker: str | None
    thinker_max_new_tokens: int | None
    talker_max_new_tokens: int | None
    device: str
    base_url: str | None
    served_model_name: str | None
    api_key_env: str | None
    timeout_s: float
    max_retries: int
    max_concurrency: int
    launch: bool
    launch_executable: str | list[str]
    launch_args: list[str]
    launch_host: str
    launch_port: int | None
    launch_timeout_s: float
    launch_log: str | None
    seed: int


def _bad(key: str, wanted: str, value: Any) -> Exception:
    return ParamError(f"{OWNER}: {key} must be {wanted}, got {value!r}")


def _int_or_none(params: dict[str, Any], key: str, minimum: int) -> int | None:
    value = params[key]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _bad(key, f"null or an integer >= {minimum}", value)
    return value


def _number(params: dict[str, Any], key: str) -> float:
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise _bad(key, "a number > 0", value)
    return float(value)


def _str_or_none(params: dict[str, Any], key: str) -> str | None:
    value = params[key]
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _bad(key, "null or a non-empty string", value)
    return value


def parse_settings(raw: dict[str, Any]) -> Settings:
    """The settings from the declared parameters (types and bounds are checked by the
    declaration): spellings normalised, rules across keys checked (``ParamError`` naming the
    key)."""
    p = {**DEFAULTS, **{k: v for k, v in raw.items() if k in DEFAULTS}}
    if isinstance(p["launch_args"], tuple):
        p["launch_args"] = list(p["launch_args"])
    if isinstance(p["launch_executable"], tuple):
        p["launch_executable"] = list(p["launch_executable"])
    model = p["model"]
    if not isinstance(model, str) or not model.strip():
        raise _bad("model", "a hub id or a local checkpoint directory", model)
    backend = p["backend"]
    if backend not in BACKENDS:
        raise _bad("backend", " or ".join(BACKENDS), backend)
    dtype = str(p["dtype"]).lower()
    if DTYPE_NAMES.get(dtype) not in DTYPES:
        raise _bad("dtype", " | ".join(DTYPES), p["dtype"])
    attention = p["attn_implementation"]
    if attention not in ATTENTION:
        raise _bad("attn_implementation", " | ".join(ATTENTION), attention)
    speaker = _str_or_none(p, "speaker")
    if speaker is not None and backend == "vllm_omni":
        raise _bad("speaker", "null with backend=vllm_omni (the server picks the voice)", speaker)
    device = p["device"]
    if not isinstance(device, str) or not device.strip():
        raise _bad("device", "'auto' or a torch device such as 'cuda:0'", device)
    launch = p["launch"]
    if not isinstance(launch, bool):
        raise _bad("launch", "true or false", launch)
    if launch and backend != "vllm_omni":
        raise _bad("launch", "false unless backend=vllm_omni", launch)
    base_url = _str_or_none(p, "base_url")
    if backend == "vllm_omni" and not launch and base_url is None:
        raise _bad("base_url", "the server's URL (e.g. http://127.0.0.1:8091/v1)", base_url)
    exe = p["launch_executable"]
    if not (isinstance(exe, str) and exe) and not (
        isinstance(exe, list) and exe and all(isinstance(a, str) and a for a in exe)
    ):
        raise _bad("launch_executable", "a program name/path or a list of strings", exe)
    args = p["launch_args"]
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
        raise _bad("launch_args", "a list of command-line arguments", args)
    port = p["launch_port"]
    if port is not None and (
        isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536
    ):
        raise _bad("launch_port", "null (any free port) or a TCP port number", port)
    host = p["launch_host"]
    if not isinstance(host, str) or not host:
        raise _bad("launch_host", "a host name or address", host)
    retries = p["max_retries"]
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise _bad("max_retries", "an integer >= 0", retries)
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise _bad("seed", "an integer", seed)
    return Settings(
        model=model,
        revision=_str_or_none(p, "revision"),
        backend=backend,
        dtype=DTYPE_NAMES[dtype],
        attn_implementation=attention,
        speaker=speaker,
        thinker_max_new_tokens=_int_or_none(p, "thinker_max_new_tokens", 1),
        talker_max_new_tokens=_int_or_none(p, "talker_max_new_tokens", 1),
        device=device,
        base_url=base_url,
        served_model_name=_str_or_none(p, "served_model_name"),
        api_key_env=_str_or_none(p, "api_key_env"),
        timeout_s=_number(p, "timeout_s"),
        max_retries=retries,
        max_concurrency=_int_or_none(p, "max_concurrency", 1) or 1,
        launch=launch,
        launch_executable=exe,
        launch_args=[str(a) for a in args],
        launch_host=host,
        launch_port=port,
        launch_timeout_s=_number(p, "launch_timeout_s"),
        launch_log=_str_or_none(p, "launch_log"),
        seed=seed,
    )


def example_seed(seed: int, item: dict[str, Any]) -> int:
    """A per-example seed from the run's seed and the example's content (31 bits: valid for torch
    and as an OpenAI ``seed``)."""
    image = item.get("current_image")
    return item_seed(
        seed,
        image.sha256 if isinstance(image, Media) else "",
        str(item.get("current_text") or ""),
        json.dumps(item.get("metadata"), sort_keys=True, default=str),
        json.dumps(item.get("conditions"), sort_keys=True, default=str),
    ) % (2**31)


def _failure(exc: BaseException) -> Failure:
    if isinstance(exc, ComponentError):
        return Failure(exc.category, str(exc))
    if isinstance(exc, TimeoutError):
        return Failure("timeout", f"{type(exc).__name__}: {exc}")
    return Failure("model_error", f"{type(exc).__name__}: {exc}")


def _excerpt(text: str, limit: int = 300) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "..."


class Qwen25OmniBackbone(Backbone):
    """Qwen2.5-Omni-7B: narration + speech natively, the image prompt for an image expert."""

    name = "qwen25omni"
    version = "1"
    produces: ClassVar[frozenset[str]] = frozenset({"text", "speech"})
    reads = ("current_image", "current_text", "metadata", "conditions")
    parameters = PARAMETERS
    default_batch_size = 1
    description = (
        "Qwen2.5-Omni-7B (T+S): spoken line + audio, then next page JSON {text, t2i} given the line"
    )
    requirements: ClassVar[tuple[str, ...]] = QWEN25OMNI_REQUIREMENTS
    defaults: ClassVar[dict[str, Any]] = DEFAULTS

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.settings = parse_settings(self.params)
        self.runner: Any = None
        self._load_error: str | None = None

    def output_params(self) -> dict[str, Any]:
        """The validated values (defaults filled in, spellings normalised) of every parameter that
        changes outputs, and the seed: an omitted key and its default give one cache key."""
        s = self.settings
        keys = sorted(k for k in DEFAULTS if k not in RUNTIME_PARAMS)
        return {**{k: getattr(s, k) for k in keys}, "seed": s.seed}

    # -- lifecycle -----------------------------------------------------------------------------
    def load(self) -> None:
        """Load the model (transformers) or open the client, starting the server if asked.  A
        failed load is remembered: later items fail fast instead of loading (launching) again."""
        if self.runner is not None:
            return
        if self._load_error is not None:
            raise ComponentError(self._load_error)
        if self.settings.backend == "transformers":
            from omnistory_qwen25omni.hf import TransformersRunner

            runner: Any = TransformersRunner(self.settings)
        else:
            from omnistory_qwen25omni.omni_server import OmniServerRunner

            runner = OmniServerRunner(self.settings)
        try:
            runner.load()
        except ComponentError as exc:
            self._load_error = str(exc)
            runner.unload()
            raise
        self.runner = runner

    def unload(self) -> None:
        self._load_error = None
        runner, self.runner = self.runner, None
        if runner is not None:
            runner.unload()

    # -- calls ---------------------------------------------------------------------------------
    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        """One example after another (transformers), or up to ``max_concurrency`` requests at
        once (vllm_omni); an example's exception is that example's failure, and a load failure
        every example's."""
        try:
            self.load()
        except ComponentError as exc:
            return [exc for _ in items]

        def one(item: dict[str, Any]) -> Any:
            try:
                return self.run_one(item)
            except Exception as exc:  # noqa: BLE001 - recorded as this example's failure
                return exc

        workers = 1
        if self.settings.backend == "vllm_omni":
            workers = min(self.settings.max_concurrency, len(items))
        if workers <= 1:
            return [one(item) for item in items]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(one, items))

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        self.load()
        runner = self.runner
        image: Media = item["current_image"]
        current_text = str(item.get("current_text") or "")
        metadata, conditions = item.get("metadata"), item.get("conditions")
        seed = example_seed(self.settings.seed, item)
        usage: dict[str, Any] = {"backend": self.settings.backend, "passes": 0, "tokens": {}}
        raw: dict[str, str] = {}
        usage["raw"] = raw
        if getattr(runner, "attention", None):
            usage["attn_implementation"] = runner.attention

        def count(name: str, reply: Reply) -> None:
            usage["passes"] += 1
            usage["tokens"][name] = reply.tokens()

        # -- pass 1: the line of dialogue and its speech (a failure here loses the example) ------
        first = runner.chat(
            pass1_messages(metadata, current_text, conditions), image, None, True, seed
        )
        count("pass1", first)
        raw["pass1"] = first.text
        quote = extract_quote(first.text)
        if not quote:
            raise ComponentError(
                f"{OWNER}: pass 1 gave no usable line of dialogue: {_excerpt(first.text)!r}",
                category="empty_output",
            )
        usage["quote"] = quote
        failures: dict[str, Failure] = {}
        speech: Speech | None = first.speech
        usage["speech_fallback"] = False
        if speech is None:
            speech, failure = self._forced_speech(runner, quote, seed, count)
            usage["speech_fallback"] = True
            if failure is not None:
                failures["speech"] = failure

        # -- pass 2: the next page as JSON, given the line as text and audio ----------------------
        audio = Audio(samples=speech.samples, sample_rate=speech.sample_rate) if speech else None
        try:
            second = runner.chat(
                pass2_messages(metadata, current_text, conditions, quote, speech is not None),
                image,
                speech,
                False,
                seed,
            )
        except Exception as exc:  # noqa: BLE001 - the text fails, the speech survives
            failures["text"] = _failure(exc)
            return self._output(None, audio, None, failures, usage)
        count("pass2", second)
        raw["pass2"] = second.text
        page = parse_page(second.text)
        if not page.ok:
            failures["text"] = Failure(
                page.category or "plan_json_error",
                f"{page.message}: {_excerpt(second.text)!r}",
            )
            return self._output(None, audio, None, failures, usage)
        usage["json_recovery"] = page.how
        return self._output(page.text, audio, {"image_prompt": page.t2i}, failures, usage)

    def _forced_speech(
        self, runner: Any, quote: str, seed: int, count: Any
    ) -> tuple[Speech | None, Failure | None]:
        """Pass 1 gave the line but no audio: make the model voice exactly that line."""
        try:
            reply = runner.speak(quote, seed)
        except Exception as exc:  # noqa: BLE001 - a speech failure only
            failure = _failure(exc)
            return None, Failure(failure.category, f"forced speech failed: {failure.message}")
        if reply is None:
            return None, Failure(
                "backbone_no_speech",
                f"{OWNER}: pass 1 returned no audio and the {self.settings.backend} backend cannot "
                "force speech",
            )
        count("forced_speech", reply)
        if reply.speech is None:
            return None, Failure(
                "backbone_no_speech", f"{OWNER}: no audio from pass 1 nor from forced speech"
            )
        return reply.speech, None

    @staticmethod
    def _output(
        text: str | None,
        audio: Audio | None,
        plan: dict[str, Any] | None,
        failures: dict[str, Failure],
        usage: dict[str, Any],
    ) -> BackboneOutput:
        tokens = usage["tokens"].values()
        usage["totals"] = {
            "prompt_tokens": sum(t.get("prompt") or 0 for t in tokens),
            "completion_tokens": sum(t.get("completion") or 0 for t in tokens),
        }
        return BackboneOutput(text=text, speech=audio, plan=plan, failures=failures, usage=usage)


BACKBONES = (Qwen25OmniBackbone,)
