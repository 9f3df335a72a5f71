"""``backbone=emova``: EMOVA-7B as a semi-orchestration T+S backbone (text + speech natively).

One ``run_one`` = two passes of the model, as in the official Omni-StoryBench runner
(``EmovaOrchestrator``):

1. **Pass 1** (current illustration + our prompt with the book metadata, the current narration and
   the next-page conditions) -> a JSON object ``{text, quote, t2i}``; greedy,
   ``max_new_tokens=1024``, ``no_repeat_ngram_size=6``.  No JSON object, or a missing/empty
   ``text``, ``quote`` or ``t2i``, fails the whole example (``plan_json_error`` /
   ``plan_missing_field``), as the official code loses all three outputs then.  The narration is
   not forced to contain the quote.
2. **Pass 2** (text only: EMOVA's text-to-speech task format + the quote) -> speech units; greedy,
   ``max_new_tokens=4096``, every step restricted to the ``<|speech_N|>`` tokens and EOS; the
   units are turned into a waveform by EMOVA's speech tokenizer with the ``speaker`` voice
   (``female``), at the tokenizer's own sample rate.  A failure here (no units, a decode error)
   loses the speech only: the narration and the image prompt survive.

The image is the external image expert's job: the backbone returns ``plan={"image_prompt": t2i}``.

This module imports no torch; the model code lives in :mod:`omnistory_emova.runtime`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from omnistory_core.api import (
    GENDERS,
    Backbone,
    BackboneOutput,
    ComponentError,
    Failure,
    Param,
    ParamError,
    SettingsError,
)
from omnistory_core.kit.diffusion import DTYPE_NAMES, positive_int, setting

#: the default system prompt of EMOVA's checkpoints (``default_system_prompt`` in their config)
SYSTEM_PROMPT = "You are a helpful assistant."

#: EMOVA's text-to-speech task format, verbatim (typo included) from its training data and demo
#: (``tts_format`` in emova/conversation.py and emova/serve/gradio_web_server.py): the instruction
#: the model was fine-tuned to answer with speech units.  A model fact, not prose of ours.
TTS_TASK_PREFIX = "Please synthesize the speech corresponding to the follwing text.\n"

#: the keys pass 1 must return, all non-empty strings
REPLY_FIELDS: tuple[str, ...] = ("text", "quote", "t2i")

ATTN_IMPLEMENTATIONS = ("sdpa", "eager", "flash_attention_2")

#: pip requirements of an EMOVA environment: the inference pins of EMOVA's pyproject.toml.  The
#: speech tokenizer additionally needs the git-only ``emova_speech_tokenizer`` package (README).
EMOVA_REQUIREMENTS: tuple[str, ...] = (
    "torch==2.4.0",
    "torchvision==0.19.0",
    "transformers==4.47.1",
    "accelerate==0.33.0",
    "sentencepiece==0.1.99",
    "einops==0.6.1",
    "timm==0.9.12",
)

_FENCE = re.compile(r"```(?:json)?\s*([\s\S]*?)\s*```", re.IGNORECASE)


# -- prompts (pure) --------------------------------------------------------------------------
def _json_block(value: Any) -> str:
    return json.dumps(value if value is not None else {}, ensure_ascii=False, indent=2, default=str)


def pass1_prompt(item: dict[str, Any]) -> str:
    """The user text of pass 1 (the current illustration is a separate image part before it)."""
    return (
        "You are continuing a children's picture book. The attached picture is the current "
        "page; the book's details, the current page's text and the requirements for the next "
        "page follow below. Write the next page.\n"
        "Give back:\n"
        '- "text": the narration of the next page. It follows on from the current page, fits '
        "the story and the requirements, and stays short.\n"
        '- "quote": one short line of dialogue that a character says aloud on the next page, '
        "in keeping with its narration and its requirements.\n"
        '- "t2i": a prompt for a text-to-image model that will draw the next page: the scene '
        "and the characters in it, with what they look like and what they are doing.\n"
        "The requirements may describe the scene, the characters with their emotions and "
        "actions, and the ambient sound.\n"
        'Reply with one JSON object with the keys "text", "quote" and "t2i", and nothing '
        "else.\n\n"
        f"Book details:\n{_json_block(item.get('metadata'))}\n\n"
        f"Current page text:\n{item.get('current_text') or ''}\n\n"
        f"Requirements for the next page:\n{_json_block(item.get('conditions'))}"
    )


def pass1_messages(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The pass-1 conversation in the processor's chat format (image part, then the prompt)."""
    return [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
        {
            "role": "user",
            "content": [{"type": "image"}, {"type": "text", "text": pass1_prompt(item)}],
        },
    ]


def pass2_messages(quote: str) -> list[dict[str, Any]]:
    """The pass-2 conversation: text only, EMOVA's TTS task format followed by the quote."""
    return [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
        {"role": "user", "content": [{"type": "text", "text": TTS_TASK_PREFIX + quote}]},
    ]


# -- reply parsing (pure) ----------------------------------------------------------------------
@dataclass(frozen=True)
class Reply:
    """What pass 1 returned: the narration, the line to speak and the image prompt."""

    text: str
    quote: str
    t2i: str


def _excerpt(raw: str, limit: int = 300) -> str:
    flat = " ".join(raw.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


def find_json_object(raw: str) -> dict[str, Any] | None:
    """The reply's JSON object: the whole text, else a fenced block, else the span from the
    first ``{`` to the last ``}`` (the official runner's three attempts); ``None`` if none is a
    JSON object."""
    text = raw.strip()
    candidates = [text]
    fence = _FENCE.search(text)
    if fence:
        candidates.append(fence.group(1).strip())
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_reply(raw: str) -> Reply:
    """Pass 1's reply -> :class:`Reply`, or a :class:`ComponentError` that fails the example
    (``plan_json_error`` without a JSON object, ``plan_missing_field`` when ``text``, ``quote``
    or ``t2i`` is absent, empty or not a string)."""
    obj = find_json_object(raw)
    if obj is None:
        raise ComponentError(
            f"backbone=emova: pass 1 returned no JSON object: {_excerpt(raw)!r}", "plan_json_error"
        )
    missing = [k for k in REPLY_FIELDS if not isinstance(obj.get(k), str) or not obj[k].strip()]
    if missing:
        raise ComponentError(
            f"backbone=emova: pass 1 returned no usable {', '.join(missing)}: {_excerpt(raw)!r}",
            "plan_missing_field",
        )
    return Reply(text=obj["text"].strip(), quote=obj["quote"].strip(), t2i=obj["t2i"].strip())


# -- settings --------------------------------------------------------------------------------
@dataclass(frozen=True)
class EmovaSettings:
    model: str
    revision: str | None
    speech_tokenizer: str
    speech_tokenizer_revision: str | None
    speaker: str
    max_new_tokens: int
    no_repeat_ngram_size: int
    speech_max_new_tokens: int
    dtype: str
    attn_implementation: str
    device: str


def _checkpoint(owner: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(f"{owner}: {key} must be a hub id or a local directory, got {value!r}")
    return value


def _revision(owner: str, key: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise SettingsError(f"{owner}: {key} must be a branch, tag or commit, got {value!r}")
    return value


def _choice(owner: str, key: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value.lower() not in choices:
        raise SettingsError(f"{owner}: {key} must be one of {', '.join(choices)}, got {value!r}")
    return value.lower()


def _non_negative_int(owner: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SettingsError(f"{owner}: {key} must be an integer >= 0, got {value!r}")
    return value


def parse_emova_settings(
    owner: str, params: dict[str, Any], defaults: dict[str, Any]
) -> EmovaSettings:
    """The settings from the declared parameters (keys and types are checked by the
    declaration): spellings normalised, values checked; a :class:`SettingsError` names the bad
    one."""
    seed = params.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SettingsError(f"{owner}: seed must be an integer, got {seed!r}")
    get = lambda key: setting(params, defaults, key)  # noqa: E731
    device = get("device")
    if not isinstance(device, str) or not device.strip():
        raise SettingsError(
            f"{owner}: device must be 'auto' or a torch device such as 'cuda:0', got {device!r}"
        )
    return EmovaSettings(
        model=_checkpoint(owner, "model", get("model")),
        revision=_revision(owner, "revision", params.get("revision")),
        speech_tokenizer=_checkpoint(owner, "speech_tokenizer", get("speech_tokenizer")),
        speech_tokenizer_revision=_revision(
            owner, "speech_tokenizer_revision", params.get("speech_tokenizer_revision")
        ),
        speaker=_choice(owner, "speaker", get("speaker"), GENDERS),
        max_new_tokens=positive_int(owner, "max_new_tokens", get("max_new_tokens")),
        no_repeat_ngram_size=_non_negative_int(
            owner, "no_repeat_ngram_size", get("no_repeat_ngram_size")
        ),
        speech_max_new_tokens=positive_int(
            owner, "speech_max_new_tokens", get("speech_max_new_tokens")
        ),
        dtype=DTYPE_NAMES[_choice(owner, "dtype", get("dtype"), tuple(DTYPE_NAMES))],
        attn_implementation=_choice(
            owner, "attn_implementation", get("attn_implementation"), ATTN_IMPLEMENTATIONS
        ),
        device=device.strip(),
    )


# -- the component -------------------------------------------------------------------------------
class Emova(Backbone):
    """EMOVA-7B (``Emova-ollm/emova-qwen-2-5-7b-hf``, remote code) + its speech tokenizer."""

    name = "emova"
    version = "1"
    produces = frozenset({"text", "speech"})
    reads = ("current_image", "current_text", "metadata", "conditions")
    default_batch_size = 1
    description = "EMOVA-7B: narration + image prompt (JSON), then the quote spoken as speech units"
    requirements: ClassVar[tuple[str, ...]] = EMOVA_REQUIREMENTS
    parameters = (
        Param(
            "model",
            str,
            "Emova-ollm/emova-qwen-2-5-7b-hf",
            "hub id or directory (remote code)",
            weights=True,
        ),
        Param("revision", str, None, "hub revision of the model; null: default branch"),
        Param(
            "speech_tokenizer",
            str,
            "Emova-ollm/emova_speech_tokenizer_hf",
            "EMOVA's speech tokenizer (needs the git-only emova_speech_tokenizer package)",
        ),
        Param("speech_tokenizer_revision", str, None, "hub revision of the speech tokenizer"),
        Param("speaker", str, "female", "voice of the unit decoder (official: female)"),
        Param("max_new_tokens", int, 1024, "pass 1 (JSON), greedy as the official runner", ge=1),
        Param("no_repeat_ngram_size", int, 6, "pass 1; 0 = off", ge=0),
        Param("speech_max_new_tokens", int, 4096, "pass 2 (speech units)", ge=1),
        Param("dtype", str, "bfloat16", "bfloat16 (official) | float16 | float32 | auto"),
        Param("attn_implementation", str, "sdpa", "sdpa (official) | eager | flash_attention_2"),
        Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
    )
    defaults: ClassVar[dict[str, Any]] = {p.name: p.default for p in parameters}

    def __init__(self, **params: Any):
        super().__init__(**params)
        try:
            self.settings = parse_emova_settings(
                f"backbone={self.name}", self.params, self.defaults
            )
        except SettingsError as exc:
            raise ParamError(str(exc)) from None
        self.runtime: Any = None

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        """The hub checkpoints to prefetch: the model and its speech tokenizer."""
        return [str(params.get(k) or cls.defaults[k]) for k in ("model", "speech_tokenizer")]

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        from omnistory_emova.runtime import EmovaRuntime

        self.runtime = EmovaRuntime.load(self.settings)

    def unload(self) -> None:
        if self.runtime is not None:
            self.runtime.close()
        self.runtime = None

    # -- calls -----------------------------------------------------------------------------
    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        if self.runtime is None:
            self.load()
        s = self.settings
        image = item["current_image"].open_image()
        raw, usage1 = self.runtime.generate_reply(
            pass1_messages(item),
            image,
            max_new_tokens=s.max_new_tokens,
            no_repeat_ngram_size=s.no_repeat_ngram_size,
        )
        reply = parse_reply(raw)  # raises: the whole example is lost, as in the official runner
        usage: dict[str, Any] = {"passes": 2, **usage1, "quote": reply.quote}
        failures: dict[str, Failure] = {}
        speech = None
        try:
            speech, usage2 = self.runtime.speak(
                pass2_messages(reply.quote),
                speaker=s.speaker,
                max_new_tokens=s.speech_max_new_tokens,
            )
            usage.update(usage2)
        except ComponentError as exc:
            failures["speech"] = Failure(exc.category, str(exc))
        except Exception as exc:  # noqa: BLE001 - the speech is lost, text and plan survive
            self.runtime.after_error()
            failures["speech"] = Failure(
                "model_error", f"backbone=emova: speech pass failed: {type(exc).__name__}: {exc}"
            )
        return BackboneOutput(
            text=reply.text,
            speech=speech,
            plan={"image_prompt": reply.t2i},
            failures=failures,
            usage=usage,
        )


BACKBONES = (Emova,)

__all__ = [
    "BACKBONES",
    "EMOVA_REQUIREMENTS",
    "Emova",
    "EmovaSettings",
    "Reply",
    "SYSTEM_PROMPT",
    "TTS_TASK_PREFIX",
    "find_json_object",
    "parse_emova_settings",
    "parse_reply",
    "pass1_messages",
    "pass1_prompt",
    "pass2_messages",
]
