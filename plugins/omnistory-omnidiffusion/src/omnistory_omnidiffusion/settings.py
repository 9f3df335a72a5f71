"""The parameters of ``backbone=omnidiffusion``: defaults (the official Omni-StoryBench runner's
settings), validation and the checkpoints it loads.  No torch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omnistory_core.experts.diffusion import (
    DTYPE_NAMES,
    SettingsError,
    check_params,
    non_negative_float,
    positive_int,
    setting,
)

#: denoising orders the Dream sampler (``generation_utils.py`` of the checkpoint) knows
ALGORITHMS = ("origin", "maskgit_plus", "topk_margin", "entropy", "entropy-penalty")
#: what happens when the planning pass leaves a line out (see README)
FALLBACKS = ("official", "none")

DEFAULTS: dict[str, Any] = {
    # git checkout of VITA-MLLM/Omni-Diffusion with its GLM-4-Voice submodule (runtime only)
    "source_dir": None,
    # checkpoints: hub ids or local directories
    "model": "lijiang/Omni-Diffusion",
    "revision": None,
    "image_tokenizer": "showlab/magvitv2",
    "image_tokenizer_revision": None,
    "audio_decoder": "THUDM/glm-4-voice-decoder",
    "audio_decoder_revision": None,
    # what a missing NARRATION / SPEAKER / SPEECH / IMAGE_PROMPT line becomes
    "fallbacks": "official",
    # random, numpy and torch are seeded once, when the model loads; null = the run's seed
    "load_seed": 42,
    # the current page is resized and centre-cropped to this square before MAGVIT encodes it
    "input_resolution": 512,
    # shared by every pass
    "temperature": 0.0,
    "top_p": 0.9,
    # 1. planning pass (current page + story inputs -> four labelled lines)
    "plan_max_tokens": 192,
    "plan_steps": 192,
    "plan_alg": "entropy",
    "plan_repeat_penalty": 1.05,
    # 1b. one more planning pass when the first wrote no SPEECH line
    "recovery_max_tokens": 80,
    "recovery_steps": 80,
    # 2. text-to-image pass
    "image_max_tokens": 260,
    "image_steps": 260,
    "image_alg": "entropy-penalty",
    "image_repeat_penalty": 1.2,
    "image_position_penalty": 2.0,
    "image_cfg": 0.0,
    # 3. text-to-speech pass
    "speech_max_tokens": 64,
    "speech_steps": 32,
    "speech_alg": "entropy",
    "speech_repeat_penalty": 1.0,
    # flow-matching steps of the GLM-4-Voice decoder (token2wav's option_steps)
    "flow_steps": 10,
    # runtime
    "dtype": "auto",
    "device": "auto",
    "attn_implementation": None,
}

#: parameters that do not change outputs (not in the cache key)
RUNTIME_PARAMS: tuple[str, ...] = ("source_dir", "device", "attn_implementation")

#: (max_tokens, steps, alg, repeat_penalty) keys of each pass
PASSES: dict[str, tuple[str, str, str, str]] = {
    "plan": ("plan_max_tokens", "plan_steps", "plan_alg", "plan_repeat_penalty"),
    "recovery": ("recovery_max_tokens", "recovery_steps", "plan_alg", "plan_repeat_penalty"),
    "image": ("image_max_tokens", "image_steps", "image_alg", "image_repeat_penalty"),
    "speech": ("speech_max_tokens", "speech_steps", "speech_alg", "speech_repeat_penalty"),
}

OWNER = "backbone=omnidiffusion"


def _string(key: str, value: Any, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        what = "a string or null" if optional else "a hub id or a local path"
        raise SettingsError(f"{OWNER}: {key} must be {what}, got {value!r}")
    return value


def _positive_float(key: str, value: Any) -> float:
    number = non_negative_float(OWNER, key, value)
    if number <= 0:
        raise SettingsError(f"{OWNER}: {key} must be a positive number, got {value!r}")
    return number


def check_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter validated and the defaults filled in; a :class:`SettingsError` (one line,
    naming ``backbone=omnidiffusion`` and the parameter) for the first bad one."""
    check_params(OWNER, params, DEFAULTS)
    s: dict[str, Any] = {}
    for key in ("model", "image_tokenizer", "audio_decoder"):
        s[key] = _string(key, setting(params, DEFAULTS, key))
    for key in ("revision", "image_tokenizer_revision", "audio_decoder_revision"):
        s[key] = _string(key, params.get(key), optional=True)
    fallbacks = setting(params, DEFAULTS, "fallbacks")
    if fallbacks not in FALLBACKS:
        raise SettingsError(
            f"{OWNER}: fallbacks must be one of {', '.join(FALLBACKS)}, got {fallbacks!r}"
        )
    s["fallbacks"] = fallbacks
    for key in ("load_seed",):
        value = params.get(key, DEFAULTS[key])
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise SettingsError(f"{OWNER}: {key} must be an integer or null, got {value!r}")
        s[key] = value
    seed = params.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SettingsError(f"{OWNER}: seed must be an integer, got {seed!r}")
    s["seed"] = seed
    s["input_resolution"] = positive_int(
        OWNER, "input_resolution", setting(params, DEFAULTS, "input_resolution")
    )
    s["temperature"] = non_negative_float(
        OWNER, "temperature", setting(params, DEFAULTS, "temperature")
    )
    top_p = _positive_float("top_p", setting(params, DEFAULTS, "top_p"))
    if top_p > 1:
        raise SettingsError(f"{OWNER}: top_p must be in (0, 1], got {top_p!r}")
    s["top_p"] = top_p
    for max_key, steps_key, alg_key, penalty_key in PASSES.values():
        for key in (max_key, steps_key):
            s[key] = positive_int(OWNER, key, setting(params, DEFAULTS, key))
        alg = setting(params, DEFAULTS, alg_key)
        if alg not in ALGORITHMS:
            raise SettingsError(
                f"{OWNER}: {alg_key} must be one of {', '.join(ALGORITHMS)}, got {alg!r}"
            )
        s[alg_key] = alg
        s[penalty_key] = _positive_float(penalty_key, setting(params, DEFAULTS, penalty_key))
    s["image_position_penalty"] = _positive_float(
        "image_position_penalty", setting(params, DEFAULTS, "image_position_penalty")
    )
    s["image_cfg"] = non_negative_float(OWNER, "image_cfg", setting(params, DEFAULTS, "image_cfg"))
    s["flow_steps"] = positive_int(OWNER, "flow_steps", setting(params, DEFAULTS, "flow_steps"))
    dtype = str(setting(params, DEFAULTS, "dtype")).lower()
    if dtype not in DTYPE_NAMES:
        raise SettingsError(
            f"{OWNER}: dtype must be one of {', '.join(DTYPE_NAMES)}, got {dtype!r}"
        )
    s["dtype"] = DTYPE_NAMES[dtype]
    device = str(setting(params, DEFAULTS, "device")).strip()
    if not device:
        raise SettingsError(f"{OWNER}: device must be 'auto' or a torch device such as 'cuda:0'")
    s["device"] = device
    s["attn_implementation"] = _string(
        "attn_implementation", params.get("attn_implementation"), optional=True
    )
    s["source_dir"] = params.get("source_dir")
    return s


def checkpoints(params: Mapping[str, Any]) -> list[str]:
    """The hub ids ``prefetch`` downloads: Omni-Diffusion, MAGVIT-v2 and the GLM-4-Voice decoder."""
    return [
        str(params.get(key) or DEFAULTS[key])
        for key in ("model", "image_tokenizer", "audio_decoder")
    ]
