"""Parameters of ``backbone=dynin``: defaults (the benchmark runner's settings) and validation."""

from __future__ import annotations

import re
from typing import Any

from omnistory_core.api import Param
from omnistory_dynin.layout import parse_layout

NAME = "dynin"
BACKENDS: tuple[str, ...] = ("transformers", "vllm_omni")
DTYPES: tuple[str, ...] = ("auto", "bfloat16", "float16", "float32")
#: the style condition string of the EMOVA speech decoder
STYLE = re.compile(r"^gender-[a-z]+_emotion-[a-z]+_speed-[a-z]+_pitch-[a-z]+$")

#: the official runner's pinned hub revisions (any-to-any/Dynin-omni/run_storybench.py)
MODEL_REVISION = "04799bddcf17e666976f6894516a4a34b85b12ad"
IMAGE_CODEC_REVISION = "5a869517cbbda6ac4de8b438fc59b7f053cb4238"
SPEECH_CODEC_REVISION = "1062a384c4950fcda60be38fc0fc3f169acc7e77"

PARAMETERS: tuple[Param, ...] = (
    Param(
        "backend",
        str,
        "transformers",
        "transformers (the joint pass here; needs source_dir) | vllm_omni (a vLLM-Omni server)",
        choices=BACKENDS,
    ),
    # -- the checkpoints (both backends read model) --
    Param("model", str, "snu-aidas/Dynin-Omni_nips", "hub id or local directory", weights=True),
    Param("revision", str, MODEL_REVISION, "hub revision the runner pins (hub ids only)"),
    Param("image_codec", str, "snu-aidas/magvitv2", "MAGVIT-v2 image tokenizer"),
    Param("image_codec_revision", str, IMAGE_CODEC_REVISION, "hub revision the runner pins"),
    Param("speech_codec", str, "snu-aidas/emova_speech_tokenizer_vllm", "EMOVA speech decoder"),
    Param("speech_codec_revision", str, SPEECH_CODEC_REVISION, "hub revision the runner pins"),
    Param(
        "speech_runtime_repo",
        str,
        "snu-aidas/emova_speech_tokenizer_vllm",
        "the speech decoder config's runtime_repo_id",
    ),
    # -- the joint pass (transformers backend) --
    Param(
        "dtype",
        str,
        "auto",
        "auto: bfloat16 on a GPU (the runner's), float32 on the CPU",
        choices=DTYPES,
    ),
    Param("steps", int, 128, "denoising steps, one forward each", ge=1),
    Param("text_length", int, 128, "text slots (counting <bos>)", ge=2),
    Param("speech_length", int, 125, "speech slots (counting <soa>)", ge=2),
    Param("prompt_length", int, 1024, "tokens of the left-padded text prompt", ge=1),
    Param("image_resolution", int, 336, "square side, a multiple of 16", ge=16),
    Param("min_speech_codes", int, 8, "fewer generated speech codes is a speech failure", ge=1),
    Param(
        "speech_style",
        str,
        "gender-female_emotion-neutral_speed-normal_pitch-normal",
        "the EMOVA decoder's fixed voice (as the runner)",
    ),
    Param("token_layout", dict, None, "reserved ids and sizes; null: Dynin-Omni_nips'"),
    # -- both backends --
    Param("all_or_nothing", bool, True, "keep an example only when all three modalities are valid"),
    Param(
        "seed",
        int,
        20261006,
        "base seed (+ a hash of each example's inputs); the run's `seed` does not change it",
        ge=0,
    ),
    # -- vllm_omni backend --
    Param("served_model", str, None, "model name sent in requests; null: model"),
    Param("extra_body", (dict, None), {}, "extra request fields sent verbatim"),
    # -- runtime only --
    Param(
        "source_dir",
        str,
        None,
        "transformers: checkout of AIDASLab/Dynin-Omni (the key hashes its models/*.py)",
        runtime=True,
    ),
    Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
    Param("local_files_only", bool, False, "only the local Hugging Face cache", runtime=True),
    Param(
        "base_url",
        str,
        None,
        "vllm_omni server; null: $OMNISTORY_DYNIN_BASE_URL, else http://127.0.0.1:8091/v1",
        runtime=True,
    ),
    Param("api_key_env", str, "OMNISTORY_DYNIN_API_KEY", "key variable NAME", runtime=True),
    Param("timeout_s", float, 1800.0, "per request (seconds)", runtime=True, gt=0),
    Param("max_retries", int, 2, "retries of a request", runtime=True, ge=0),
    Param("max_concurrency", int, 1, "examples in flight", runtime=True, ge=1),
    Param("launch", bool, False, "start the vLLM-Omni server on the first call", runtime=True),
    Param("launch_executable", (str, list), "vllm", "program or argv prefix", runtime=True),
    Param("launch_args", (list, None), [], "extra arguments of `serve`", runtime=True),
    Param("launch_host", str, "127.0.0.1", "host the launched server binds", runtime=True),
    Param("launch_port", int, None, "null: any free port", runtime=True, ge=1, le=65535),
    Param("launch_timeout_s", float, 1800.0, "seconds to wait for /health", runtime=True, gt=0),
    Param("launch_log", str, None, "server log; null: a temporary file", runtime=True),
)
DEFAULTS: dict[str, Any] = {p.name: p.default for p in PARAMETERS}

RUNTIME: tuple[str, ...] = tuple(p.name for p in PARAMETERS if p.runtime)
#: what changes the outputs of each backend (the cache key holds these, plus ``backend``)
OUTPUT_PARAMS: dict[str, tuple[str, ...]] = {
    "transformers": (
        "model",
        "revision",
        "image_codec",
        "image_codec_revision",
        "speech_codec",
        "speech_codec_revision",
        "speech_runtime_repo",
        "dtype",
        "steps",
        "text_length",
        "speech_length",
        "prompt_length",
        "image_resolution",
        "min_speech_codes",
        "speech_style",
        "token_layout",
        "all_or_nothing",
        "seed",
    ),
    "vllm_omni": ("model", "served_model", "extra_body", "all_or_nothing", "seed"),
}


class ParamError(ValueError):
    """One bad parameter; the message is one line naming ``backbone=dynin`` and the key."""


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _optional_text(value: Any) -> bool:
    return value is None or _text(value)


def check_params(params: dict[str, Any]) -> dict[str, Any]:
    """Defaults merged with ``params`` (keys, types and bounds are checked by the declaration,
    :data:`PARAMETERS`), the rules the declaration cannot say checked; :class:`ParamError`
    otherwise."""
    p = {**DEFAULTS, **{k: v for k, v in params.items() if k != "batch_size"}}
    for key in ("extra_body",):
        if p[key] is None:
            p[key] = {}
    for key in ("launch_args",):
        if p[key] is None:
            p[key] = []
    checks: list[tuple[str, bool, str]] = [
        ("model", _text(p["model"]), "a hub id or a local directory"),
        ("image_codec", _text(p["image_codec"]), "a hub id or a local directory"),
        ("speech_codec", _text(p["speech_codec"]), "a hub id or a local directory"),
        ("speech_runtime_repo", _text(p["speech_runtime_repo"]), "a hub id"),
        (
            "speech_style",
            isinstance(p["speech_style"], str) and bool(STYLE.match(p["speech_style"])),
            "an EMOVA style string like gender-female_emotion-neutral_speed-normal_pitch-normal",
        ),
        ("served_model", _optional_text(p["served_model"]), "null or the served model name"),
        ("device", _text(p["device"]), "auto or a torch device such as cuda:0"),
        (
            "base_url",
            p["base_url"] is None
            or (_text(p["base_url"]) and str(p["base_url"]).startswith(("http://", "https://"))),
            "null or an http(s) URL",
        ),
        ("api_key_env", _optional_text(p["api_key_env"]), "null or the NAME of a variable"),
        (
            "launch_executable",
            _text(p["launch_executable"])
            or (
                isinstance(p["launch_executable"], list | tuple)
                and bool(p["launch_executable"])
                and all(isinstance(a, str) for a in p["launch_executable"])
            ),
            "a program name/path or a list of strings",
        ),
        (
            "launch_args",
            isinstance(p["launch_args"], list | tuple)
            and all(isinstance(a, str | int | float) for a in p["launch_args"]),
            "a list of command-line arguments",
        ),
        ("launch_host", _text(p["launch_host"]), "a host name or address"),
        ("launch_log", _optional_text(p["launch_log"]), "null or a file path"),
    ]
    for key in ("revision", "image_codec_revision", "speech_codec_revision"):
        checks.append((key, _optional_text(p[key]), "null or a hub revision"))
    checks.append(
        (
            "image_resolution",
            _is_int(p["image_resolution"], 16) and p["image_resolution"] % 16 == 0,
            "a multiple of 16 (MAGVIT-v2 makes one code per 16x16 patch)",
        )
    )
    for key, ok, expected in checks:
        if not ok:
            raise ParamError(f"backbone={NAME}: backbone.{key} must be {expected}, got {p[key]!r}")
    try:
        p["token_layout"] = parse_layout(p["token_layout"])
    except ValueError as exc:
        raise ParamError(f"backbone={NAME}: backbone.token_layout: {exc}") from None
    p["launch_args"] = [str(a) for a in p["launch_args"]]
    if isinstance(p["launch_executable"], tuple):
        p["launch_executable"] = list(p["launch_executable"])
    return p
