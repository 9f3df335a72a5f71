"""Parameters of ``backbone=dynin``: defaults (the benchmark runner's settings) and validation."""

from __future__ import annotations

import re
from typing import Any

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

DEFAULTS: dict[str, Any] = {
    "backend": "transformers",
    # -- the checkpoints (both backends read model) --
    "model": "snu-aidas/Dynin-Omni_nips",
    "revision": MODEL_REVISION,
    "image_codec": "snu-aidas/magvitv2",
    "image_codec_revision": IMAGE_CODEC_REVISION,
    "speech_codec": "snu-aidas/emova_speech_tokenizer_vllm",
    "speech_codec_revision": SPEECH_CODEC_REVISION,
    "speech_runtime_repo": "snu-aidas/emova_speech_tokenizer_vllm",
    # -- the joint pass (transformers backend) --
    "dtype": "auto",
    "steps": 128,
    "text_length": 128,
    "speech_length": 125,
    "prompt_length": 1024,
    "image_resolution": 336,
    "min_speech_codes": 8,
    "speech_style": "gender-female_emotion-neutral_speed-normal_pitch-normal",
    "token_layout": None,
    # -- both backends --
    "all_or_nothing": True,
    "seed": 20261006,
    # -- vllm_omni backend --
    "served_model": None,
    "extra_body": {},
    # -- runtime only --
    "source_dir": None,
    "device": "auto",
    "local_files_only": False,
    "base_url": None,
    "api_key_env": "OMNISTORY_DYNIN_API_KEY",
    "timeout_s": 1800.0,
    "max_retries": 2,
    "max_concurrency": 1,
    "launch": False,
    "launch_executable": "vllm",
    "launch_args": [],
    "launch_host": "127.0.0.1",
    "launch_port": None,
    "launch_timeout_s": 1800.0,
    "launch_log": None,
}

LAUNCH_PARAMS: tuple[str, ...] = (
    "launch",
    "launch_executable",
    "launch_args",
    "launch_host",
    "launch_port",
    "launch_timeout_s",
    "launch_log",
)
RUNTIME: tuple[str, ...] = (
    "source_dir",
    "device",
    "local_files_only",
    "base_url",
    "api_key_env",
    "timeout_s",
    "max_retries",
    "max_concurrency",
    *LAUNCH_PARAMS,
)
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


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _optional_text(value: Any) -> bool:
    return value is None or _text(value)


def check_params(params: dict[str, Any]) -> dict[str, Any]:
    """Defaults merged with ``params``, every value checked; :class:`ParamError` otherwise."""
    unknown = sorted(set(params) - set(DEFAULTS) - {"batch_size"})
    if unknown:
        raise ParamError(
            f"backbone={NAME}: unknown parameter(s) {', '.join(unknown)}; valid: "
            f"{', '.join(sorted(DEFAULTS))}"
        )
    p = {**DEFAULTS, **{k: v for k, v in params.items() if k != "batch_size"}}
    for key in ("extra_body",):
        if p[key] is None:
            p[key] = {}
    for key in ("launch_args",):
        if p[key] is None:
            p[key] = []
    checks: list[tuple[str, bool, str]] = [
        ("backend", p["backend"] in BACKENDS, f"one of {', '.join(BACKENDS)}"),
        ("model", _text(p["model"]), "a hub id or a local directory"),
        ("image_codec", _text(p["image_codec"]), "a hub id or a local directory"),
        ("speech_codec", _text(p["speech_codec"]), "a hub id or a local directory"),
        ("speech_runtime_repo", _text(p["speech_runtime_repo"]), "a hub id"),
        ("dtype", p["dtype"] in DTYPES, f"one of {', '.join(DTYPES)}"),
        (
            "speech_style",
            isinstance(p["speech_style"], str) and bool(STYLE.match(p["speech_style"])),
            "an EMOVA style string like gender-female_emotion-neutral_speed-normal_pitch-normal",
        ),
        ("all_or_nothing", isinstance(p["all_or_nothing"], bool), "true or false"),
        ("seed", _is_int(p["seed"], 0), "an integer >= 0"),
        ("served_model", _optional_text(p["served_model"]), "null or the served model name"),
        ("extra_body", isinstance(p["extra_body"], dict), "a mapping (extra request fields)"),
        ("device", _text(p["device"]), "auto or a torch device such as cuda:0"),
        ("local_files_only", isinstance(p["local_files_only"], bool), "true or false"),
        (
            "base_url",
            p["base_url"] is None
            or (_text(p["base_url"]) and str(p["base_url"]).startswith(("http://", "https://"))),
            "null or an http(s) URL",
        ),
        ("api_key_env", _optional_text(p["api_key_env"]), "null or the NAME of a variable"),
        ("max_retries", _is_int(p["max_retries"], 0), "an integer >= 0"),
        ("max_concurrency", _is_int(p["max_concurrency"], 1), "an integer >= 1"),
        ("launch", isinstance(p["launch"], bool), "true or false"),
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
        (
            "launch_port",
            p["launch_port"] is None or (_is_int(p["launch_port"], 1) and p["launch_port"] < 65536),
            "null (any free port) or a TCP port number",
        ),
        ("launch_log", _optional_text(p["launch_log"]), "null or a file path"),
    ]
    for key in ("revision", "image_codec_revision", "speech_codec_revision"):
        checks.append((key, _optional_text(p[key]), "null or a hub revision"))
    for key in ("steps", "prompt_length", "min_speech_codes"):
        checks.append((key, _is_int(p[key], 1), "an integer >= 1"))
    checks.append(
        (
            "image_resolution",
            _is_int(p["image_resolution"], 16) and p["image_resolution"] % 16 == 0,
            "a multiple of 16 (MAGVIT-v2 makes one code per 16x16 patch)",
        )
    )
    for key in ("text_length", "speech_length"):
        checks.append((key, _is_int(p[key], 2), "an integer >= 2 (one slot is the start token)"))
    for key in ("timeout_s", "launch_timeout_s"):
        checks.append((key, _is_number(p[key]) and p[key] > 0, "a number > 0"))
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
