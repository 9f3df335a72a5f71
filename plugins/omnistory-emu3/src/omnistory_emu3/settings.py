"""The parameters of ``backbone=emu3``: defaults (the official runner's settings), validation,
and the checkpoints each implementation uses.  No torch."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omnistory_core.api import Param, SettingsError
from omnistory_core.kit.diffusion import (
    DTYPE_NAMES,
    boolean,
    non_negative_float,
    positive_int,
    setting,
)
from omnistory_emu3.prompting import OFFICIAL_VOICE, check_voice

IMPLEMENTATIONS = ("native", "remote_code")

#: checkpoints per implementation: transformers' own Emu3 classes read the ``-hf`` conversions;
#: the original checkpoints carry their modeling code and need the separate vision tokenizer.
#: ``BAAI/Emu3-Gen-hf`` is the id transformers' documentation loads; it is not verified here.
DEFAULT_MODELS: dict[str, dict[str, str | None]] = {
    "native": {"chat": "BAAI/Emu3-Chat-hf", "gen": "BAAI/Emu3-Gen-hf", "vq": None},
    "remote_code": {
        "chat": "BAAI/Emu3-Chat",
        "gen": "BAAI/Emu3-Gen",
        "vq": "BAAI/Emu3-VisionTokenizer",
    },
}

#: the upstream Emu3 source the official runner pins (``third_party/manifest.json``)
UPSTREAM_REPOSITORY = "https://github.com/baaivision/Emu3.git"
UPSTREAM_COMMIT = "dbbf9858194d70b8c58293e219ecffe22df0f9c7"
PROCESSOR_MODULE = "emu3/mllm/processing_emu3.py"

#: Emu3's negative prompt for classifier-free guidance (model card and official runner)
OFFICIAL_NEGATIVE_PROMPT = (
    "lowres, bad anatomy, bad hands, text, error, missing fingers, extra digit, fewer digits, "
    "cropped, worst quality, low quality, normal quality, jpeg artifacts, signature, watermark, "
    "username, blurry."
)

PARAMETERS: tuple[Param, ...] = (
    Param(
        "implementation",
        str,
        "native",
        "native: transformers' Emu3 classes on the -hf checkpoints | remote_code: the originals",
        choices=IMPLEMENTATIONS,
    ),
    Param(
        "chat_model",
        str,
        None,
        "understanding checkpoint; null: the implementation's",
        weights=True,
    ),
    Param("chat_revision", str, None, "hub revision of chat_model; null: default branch"),
    Param(
        "gen_model", str, None, "generation checkpoint; null: the implementation's", weights=True
    ),
    Param("gen_revision", str, None, "hub revision of gen_model"),
    Param(
        "vq_model", str, None, "remote_code only: the vision tokenizer (null: BAAI's)", weights=True
    ),
    Param("vq_revision", str, None, "hub revision of vq_model"),
    Param(
        "source_dir",
        str,
        None,
        f"remote_code only: a checkout of {UPSTREAM_REPOSITORY} at {UPSTREAM_COMMIT[:12]}",
        runtime=True,
    ),
    # understanding (Emu3-Chat), sampled as the official call
    Param("chat_max_new_tokens", int, 512, "Emu3-Chat new tokens", ge=1),
    Param("chat_do_sample", bool, True, "sample the chat reply"),
    Param("chat_temperature", float, 0.2, "chat temperature", gt=0),
    Param("chat_top_p", float, 0.9, "chat top_p", gt=0, le=1),
    Param("chat_top_k", int, 50, "not set by the official call: transformers 4.44's default", ge=1),
    Param("chat_repetition_penalty", float, 1.1, "chat repetition penalty", gt=0),
    # generation (Emu3-Gen)
    Param("quality_suffix", str, " masterpiece, film grained, best quality.", "appended to t2i"),
    Param("negative_prompt", str, OFFICIAL_NEGATIVE_PROMPT, "classifier-free guidance negative"),
    Param("guidance_scale", float, 3.0, "classifier-free guidance scale", ge=0),
    Param("gen_do_sample", bool, True, "sample the image tokens"),
    Param("gen_top_k", int, 2048, "image-token top_k", ge=1),
    Param("gen_max_new_tokens", int, 40960, "upper bound (H x (W + 1) + 3 tokens)", ge=1),
    Param("ratio", str, "1:1", "width:height of the generated image"),
    Param("image_area", int, None, "pixels; null: the Gen checkpoint's (or 720 x 720)", ge=1),
    # speech plan
    Param("default_voice", dict, OFFICIAL_VOICE, "the voice the quote is spoken with (official)"),
    # runtime
    Param("dtype", str, "auto", "auto: bfloat16 on a GPU, float32 on the CPU (in the key)"),
    Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
    Param("attn_implementation", str, None, "null: transformers' (sdpa)", runtime=True),
)
DEFAULTS: dict[str, Any] = {p.name: p.default for p in PARAMETERS}

_RATIO = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


@dataclass(frozen=True)
class Emu3Settings:
    implementation: str
    chat_model: str
    chat_revision: str | None
    gen_model: str
    gen_revision: str | None
    vq_model: str | None
    vq_revision: str | None
    source_dir: str | None
    chat_max_new_tokens: int
    chat_do_sample: bool
    chat_temperature: float
    chat_top_p: float
    chat_top_k: int
    chat_repetition_penalty: float
    quality_suffix: str
    negative_prompt: str
    guidance_scale: float
    gen_do_sample: bool
    gen_top_k: int
    gen_max_new_tokens: int
    ratio: str
    image_area: int | None
    default_voice: dict[str, str]
    dtype: str
    device: str
    attn_implementation: str | None
    seed: int


def _optional_str(owner: str, key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(f"{owner}: {key} must be a non-empty string or null, got {value!r}")
    return value.strip()


def _string(owner: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise SettingsError(f"{owner}: {key} must be a string, got {value!r}")
    return value


def _probability(owner: str, key: str, value: Any) -> float:
    number = non_negative_float(owner, key, value)
    if not 0.0 < number <= 1.0:
        raise SettingsError(f"{owner}: {key} must be in (0, 1], got {value!r}")
    return number


def _positive_float(owner: str, key: str, value: Any) -> float:
    number = non_negative_float(owner, key, value)
    if number <= 0.0:
        raise SettingsError(f"{owner}: {key} must be a positive number, got {value!r}")
    return number


def parse_settings(owner: str, params: Mapping[str, Any]) -> Emu3Settings:
    """The settings from the declared parameters (keys and types are checked by the
    declaration): defaults resolved, rules across keys checked (:class:`SettingsError` naming the
    key)."""

    def get(key: str) -> Any:
        return setting(params, DEFAULTS, key)

    implementation = get("implementation")
    if implementation not in IMPLEMENTATIONS:
        raise SettingsError(
            f"{owner}: implementation must be one of {', '.join(IMPLEMENTATIONS)}, "
            f"got {implementation!r}"
        )
    models = DEFAULT_MODELS[implementation]
    chat_model = _optional_str(owner, "chat_model", params.get("chat_model")) or models["chat"]
    gen_model = _optional_str(owner, "gen_model", params.get("gen_model")) or models["gen"]
    vq_model = _optional_str(owner, "vq_model", params.get("vq_model"))
    source_dir = _optional_str(owner, "source_dir", params.get("source_dir"))
    if implementation == "native":
        if vq_model is not None:
            raise SettingsError(
                f"{owner}: vq_model is only used by implementation=remote_code (the native "
                "checkpoints contain their VQ-VAE); set it to null"
            )
    else:
        vq_model = vq_model or models["vq"]
        if source_dir is None:
            raise SettingsError(
                f"{owner}: implementation=remote_code needs source_dir, a checkout of "
                f"{UPSTREAM_REPOSITORY} (commit {UPSTREAM_COMMIT}) that holds {PROCESSOR_MODULE}"
                " (or the environment variable OMNISTORY_SOURCE_BACKBONE_EMU3)"
            )
    ratio = get("ratio")
    match = _RATIO.match(ratio) if isinstance(ratio, str) else None
    if match is None or not int(match.group(1)) or not int(match.group(2)):
        raise SettingsError(f"{owner}: ratio must look like '1:1' (width:height), got {ratio!r}")
    image_area = params.get("image_area")
    if image_area is not None:
        image_area = positive_int(owner, "image_area", image_area)
    dtype = str(get("dtype")).lower()
    if dtype not in DTYPE_NAMES:
        names = ", ".join(DTYPE_NAMES)
        raise SettingsError(f"{owner}: dtype must be one of {names}, got {dtype!r}")
    device = str(get("device")).strip()
    if not device:
        raise SettingsError(f"{owner}: device must be 'auto' or a torch device such as 'cuda:0'")
    seed = params.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SettingsError(f"{owner}: seed must be an integer, got {seed!r}")
    try:
        voice = check_voice(params.get("default_voice"))
    except ValueError as exc:
        raise SettingsError(f"{owner}: default_voice: {exc}") from None
    repetition = _positive_float(owner, "chat_repetition_penalty", get("chat_repetition_penalty"))
    return Emu3Settings(
        implementation=implementation,
        chat_model=chat_model,
        chat_revision=_optional_str(owner, "chat_revision", params.get("chat_revision")),
        gen_model=gen_model,
        gen_revision=_optional_str(owner, "gen_revision", params.get("gen_revision")),
        vq_model=vq_model,
        vq_revision=_optional_str(owner, "vq_revision", params.get("vq_revision")),
        source_dir=source_dir,
        chat_max_new_tokens=positive_int(owner, "chat_max_new_tokens", get("chat_max_new_tokens")),
        chat_do_sample=boolean(owner, "chat_do_sample", get("chat_do_sample")),
        chat_temperature=_positive_float(owner, "chat_temperature", get("chat_temperature")),
        chat_top_p=_probability(owner, "chat_top_p", get("chat_top_p")),
        chat_top_k=positive_int(owner, "chat_top_k", get("chat_top_k")),
        chat_repetition_penalty=repetition,
        quality_suffix=_string(owner, "quality_suffix", get("quality_suffix")),
        negative_prompt=_string(owner, "negative_prompt", get("negative_prompt")),
        guidance_scale=non_negative_float(owner, "guidance_scale", get("guidance_scale")),
        gen_do_sample=boolean(owner, "gen_do_sample", get("gen_do_sample")),
        gen_top_k=positive_int(owner, "gen_top_k", get("gen_top_k")),
        gen_max_new_tokens=positive_int(owner, "gen_max_new_tokens", get("gen_max_new_tokens")),
        ratio=f"{int(match.group(1))}:{int(match.group(2))}",
        image_area=image_area,
        default_voice=voice,
        dtype=DTYPE_NAMES[dtype],
        device=device,
        attn_implementation=_optional_str(
            owner, "attn_implementation", params.get("attn_implementation")
        ),
        seed=seed,
    )
