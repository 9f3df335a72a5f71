"""The parameters of ``backbone=omnidiffusion``: defaults (the official Omni-StoryBench runner's
settings), validation and the checkpoints it loads.  No torch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omnistory_core.api import Param, SettingsError
from omnistory_core.kit.diffusion import DTYPE_NAMES, non_negative_float, positive_int, setting

#: denoising orders the Dream sampler (``generation_utils.py`` of the checkpoint) knows
ALGORITHMS = ("origin", "maskgit_plus", "topk_margin", "entropy", "entropy-penalty")
#: what happens when the planning pass leaves a line out (see README)
FALLBACKS = ("official", "none")


def _pass(name: str, max_tokens: int, steps: int, alg: str, penalty: float) -> tuple[Param, ...]:
    return (
        Param(f"{name}_max_tokens", (int, None), max_tokens, f"{name} pass: new tokens", ge=1),
        Param(f"{name}_steps", (int, None), steps, f"{name} pass: denoising steps", ge=1),
        Param(f"{name}_alg", str, alg, f"{name} pass: denoising order", choices=ALGORITHMS),
        Param(
            f"{name}_repeat_penalty", (float, None), penalty, f"{name} pass: repeat penalty", gt=0
        ),
    )


# null (for a number) = the default
PARAMETERS: tuple[Param, ...] = (
    Param(
        "source_dir",
        str,
        None,
        "checkout of VITA-MLLM/Omni-Diffusion with its GLM-4-Voice submodule (required)",
        runtime=True,
    ),
    Param("model", str, "lijiang/Omni-Diffusion", "hub id or local directory", weights=True),
    Param("revision", str, None, "hub revision of the model; null: default branch"),
    Param("image_tokenizer", str, "showlab/magvitv2", "MAGVIT-v2"),
    Param("image_tokenizer_revision", str, None, "hub revision of image_tokenizer"),
    Param("audio_decoder", str, "THUDM/glm-4-voice-decoder", "GLM-4-Voice decoder"),
    Param("audio_decoder_revision", str, None, "hub revision of audio_decoder"),
    Param(
        "fallbacks",
        str,
        "official",
        "what a missing NARRATION/SPEAKER/SPEECH/IMAGE_PROMPT line becomes (README)",
        choices=FALLBACKS,
    ),
    Param(
        "load_seed",
        (int, None),
        42,
        "random/numpy/torch seeded once when the model loads; null: the run's seed",
    ),
    Param("input_resolution", (int, None), 512, "square the current page is cropped to", ge=1),
    Param("temperature", (float, None), 0.0, "every pass", ge=0),
    Param("top_p", (float, None), 0.9, "every pass", gt=0, le=1),
    *_pass("plan", 192, 192, "entropy", 1.05),
    Param(
        "recovery_max_tokens",
        (int, None),
        80,
        "one more planning pass when the first wrote no SPEECH line",
        ge=1,
    ),
    Param("recovery_steps", (int, None), 80, "recovery pass: denoising steps", ge=1),
    *_pass("image", 260, 260, "entropy-penalty", 1.2),
    Param("image_position_penalty", (float, None), 2.0, "image pass: position penalty", gt=0),
    Param("image_cfg", (float, None), 0.0, "image pass: classifier-free guidance", ge=0),
    *_pass("speech", 64, 32, "entropy", 1.0),
    Param("flow_steps", (int, None), 10, "GLM-4-Voice decoder flow-matching steps", ge=1),
    Param("dtype", str, "auto", "auto: bfloat16 on a GPU, float32 on the CPU"),
    Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
    Param("attn_implementation", str, None, "null: transformers' default", runtime=True),
)
DEFAULTS: dict[str, Any] = {p.name: p.default for p in PARAMETERS}

#: parameters that do not change outputs (not in the cache key)
RUNTIME_PARAMS: tuple[str, ...] = tuple(p.name for p in PARAMETERS if p.runtime)

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
    """The settings from the declared parameters (keys and types are checked by the
    declaration): defaults filled in, spellings normalised; a :class:`SettingsError` (one line,
    naming ``backbone=omnidiffusion`` and the parameter) for the first bad one."""
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
