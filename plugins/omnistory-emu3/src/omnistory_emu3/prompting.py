"""Pure functions of the Emu3 backbone: the understanding prompt, parsing the Chat model's answer,
the quote repair and the speech plan.  No torch, no transformers.

The inputs and their selection follow the official Omni-StoryBench runner (``Emu3Orchestrator``):
title (``title``, else ``topic``), style (``genre``, else ``style``, else ``theme``), up to five
character names, the current page text, and the next-page condition reduced to its scene, narrative
goal (``text_instruction``), ambient mood (``ambient_sound``) and the states of its first three
characters (name, emotion, action).  The wording is ours.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from omnistory_core.api import LABELS

#: the system text Emu3-Chat was trained with (the model's chat format, used verbatim)
EMU3_SYSTEM_TEXT = "You are a helpful assistant."

#: the keys the Chat model must return
CHAT_KEYS: tuple[str, ...] = ("text", "t2i", "quote")

INSTRUCTIONS = """\
You are continuing an illustrated children's story by exactly one page.
Answer with one JSON object and nothing else, using exactly the keys "text", "t2i" and "quote":
{"text": "...", "t2i": "...", "quote": "..."}
Guidelines:
- text: the narration of the next page.
- quote: one line of dialogue that a character of this scene says out loud.
- t2i: a detailed visual description of the next illustration: the characters and how they look, \
the place, the composition of the picture and its mood.
- Build on the story information below; do not repeat or continue these instructions."""

SUMMARY = """\
Title: {title}
Style: {style}
Characters: {characters}

Text of the current page:
{current_text}

What the next page must contain:
{condition}

Reply with the JSON object only (keys text, t2i, quote)."""

NO_TITLE = "untitled"
NO_STYLE = "children's picture book"
NO_CHARACTERS = "not given"
NO_CONDITION = "No specific requirements: continue the story."


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def metadata_summary(metadata: Any) -> tuple[str, str, str]:
    """(title, style, character names) from the book metadata, as the official runner selects
    them: the first non-empty of title/topic, of genre/style/theme, and up to five names."""
    if not isinstance(metadata, dict):
        return NO_TITLE, NO_STYLE, NO_CHARACTERS
    title = _text(metadata.get("title")) or _text(metadata.get("topic")) or NO_TITLE
    style = (
        _text(metadata.get("genre"))
        or _text(metadata.get("style"))
        or _text(metadata.get("theme"))
        or NO_STYLE
    )
    names: list[str] = []
    characters = metadata.get("characters")
    if isinstance(characters, list):
        for character in characters[:5]:
            name = character.get("name") if isinstance(character, dict) else character
            if isinstance(name, str) and name.strip():
                names.append(name.strip())
    return title, style, ", ".join(names) or NO_CHARACTERS


def condition_summary(conditions: Any) -> str:
    """The next-page condition as a few labelled lines (scene, narrative goal, ambient mood,
    character states of the first three characters)."""
    if not isinstance(conditions, dict):
        return NO_CONDITION
    lines: list[str] = []
    for label, key in (
        ("Scene", "scene"),
        ("Narrative goal", "text_instruction"),
        ("Ambient mood", "ambient_sound"),
    ):
        value = _text(conditions.get(key))
        if value:
            lines.append(f"{label}: {value}")
    states: list[str] = []
    characters = conditions.get("characters")
    if isinstance(characters, list):
        for character in characters[:3]:
            if not isinstance(character, dict):
                continue
            state = _text(character.get("name")) or "someone"
            emotion = _text(character.get("emotion"))
            action = _text(character.get("action"))
            if emotion:
                state += f" (feeling {emotion})"
            if action:
                state += f": {action}"
            states.append(state)
    if states:
        lines.append("Character states: " + "; ".join(states))
    return "\n".join(lines) or NO_CONDITION


def chat_prompt(metadata: Any, current_text: Any, conditions: Any) -> str:
    """The whole understanding request: our instructions, a blank line, the story summary (the
    official runner likewise sends its system text and its summary as one user message)."""
    title, style, characters = metadata_summary(metadata)
    summary = SUMMARY.format(
        title=title,
        style=style,
        characters=characters,
        current_text=_text(current_text) or "(empty)",
        condition=condition_summary(conditions),
    )
    return f"{INSTRUCTIONS}\n\n{summary}"


def upstream_chat_layout(image_token: str, text: str) -> str:
    """Emu3-Chat's conversation layout as the upstream processor writes it (``mode="U"``):
    system text, ``USER:``, the image, the request, ``. ASSISTANT:``.  Used by the native path only
    when a checkpoint ships no chat template."""
    return f"{EMU3_SYSTEM_TEXT} USER: {image_token}{text}. ASSISTANT:"


# -- parsing -----------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?\s*([\s\S]*?)\s*```", re.IGNORECASE)


def _salvage_pattern(key: str) -> re.Pattern[str]:
    return re.compile(rf'"{re.escape(key)}"\s*:\s*"((?:\\.|[^"\\])*)"', re.DOTALL)


_SALVAGE = {key: _salvage_pattern(key) for key in CHAT_KEYS}


@dataclass(frozen=True)
class ChatParse:
    """What could be read from the Chat model's answer.

    ``method``: ``json`` (the whole answer), ``fenced`` (a code fence), ``brace_slice`` (first
    ``{`` to last ``}``), ``salvaged`` (single keys found by pattern), or ``None`` when nothing
    could be read (``error`` says why).
    """

    values: dict[str, Any]
    method: str | None
    error: str | None = None


def _load_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def parse_chat_output(raw: Any) -> ChatParse:
    """Best-effort reading of the JSON answer, in the official order: the whole text, the inside
    of a code fence, the slice from the first ``{`` to the last ``}``, then a per-key pattern for
    ``"text"``, ``"t2i"`` and ``"quote"`` string values.  Never raises."""
    if not isinstance(raw, str):
        return ChatParse({}, None, f"the model output is not text ({type(raw).__name__})")
    text = raw.strip()
    if not text:
        return ChatParse({}, None, "the model returned an empty answer")
    obj = _load_object(text)
    if obj is not None:
        return ChatParse(obj, "json")
    method = "brace_slice"
    fence = _FENCE.search(text)
    if fence:
        inner = fence.group(1).strip()
        obj = _load_object(inner)
        if obj is not None:
            return ChatParse(obj, "fenced")
        text = inner
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        obj = _load_object(text[start : end + 1])
        if obj is not None:
            return ChatParse(obj, method)
    salvaged: dict[str, Any] = {}
    for key, pattern in _SALVAGE.items():
        match = pattern.search(text)
        if match is None:
            continue
        try:
            salvaged[key] = json.loads(f'"{match.group(1)}"')
        except ValueError:
            salvaged[key] = match.group(1)
    if salvaged:
        return ChatParse(salvaged, "salvaged")
    return ChatParse({}, None, "no JSON object and no text/t2i/quote value in the answer")


_WRAPPING_QUOTES = (("\u201c", "\u201d"), ('"', '"'), ("'", "'"), ("\u2018", "\u2019"))


def strip_wrapping_quotes(value: str) -> str:
    """The utterance without one pair of quotation marks around it (as the official runner)."""
    value = value.strip()
    if len(value) >= 2:
        for left, right in _WRAPPING_QUOTES:
            if value.startswith(left) and value.endswith(right):
                return value[len(left) : -len(right)].strip()
    return value


#: a quoted span in narration: straight or curly double quotes, single quotes that are not
#: apostrophes, corner brackets
QUOTED_SPAN = re.compile(
    r'"(?:\\.|[^"\\])+"'
    "|\u201c[^\u201d]+\u201d"
    r"|(?<!\w)'(?:[^'\\]|\\.|(?<=\w)'(?=\w))+?'(?!\w)"
    "|\u2018(?:[^\u2019\\\\]|\\\\.|(?<=\\w)\u2019(?=\\w))+?\u2019(?!\\w)"
    "|\u300c[^\u300d]+\u300d"
    "|\u300e[^\u300f]+\u300f"
)


def insert_quote(text: str, quote: str) -> tuple[str, str | None]:
    """Make the narration carry the spoken quote, as the official runner does.

    Returns the (stripped) narration and the repair applied: ``None`` when the quote is already
    in it; ``quote_replaced_span`` when the narration quotes something else (its first quoted span
    becomes the quote); ``quote_appended`` otherwise (after a full stop if the narration does not
    end with ``.``, ``!`` or ``?``).
    """
    text = text.strip()
    if quote in text:
        return text, None
    if QUOTED_SPAN.search(text):
        return QUOTED_SPAN.sub(lambda _m: f'"{quote}"', text, count=1), "quote_replaced_span"
    if text.endswith((".", "!", "?")):
        return f'{text} "{quote}"', "quote_appended"
    return f'{text}. "{quote}"', "quote_appended"


@dataclass
class ChatResult:
    """The validated answer: narration (quote inserted), image description, utterance."""

    text: str
    t2i: str
    quote: str
    repairs: list[str] = field(default_factory=list)


class ChatOutputError(ValueError):
    """The answer cannot be used; ``category`` is the failure category for all three outputs."""

    def __init__(self, message: str, category: str):
        super().__init__(message)
        self.category = category


def read_chat_answer(raw: Any) -> ChatResult:
    """Parse and validate the Chat model's answer, or raise :class:`ChatOutputError`:
    ``plan_json_error`` when nothing can be read, ``plan_missing_field`` when text, t2i or quote is
    absent, not a string, or blank (the quote after removing its quotation marks)."""
    parsed = parse_chat_output(raw)
    if parsed.method is None:
        raise ChatOutputError(f"Emu3-Chat answer unreadable: {parsed.error}", "plan_json_error")
    values = parsed.values
    repairs = {
        "fenced": ["strip_code_fence"],
        "brace_slice": ["extract_json_object"],
        "salvaged": ["salvage_keys"],
    }.get(parsed.method, [])
    fields = {key: values.get(key) for key in CHAT_KEYS}
    quote = fields["quote"]
    if isinstance(quote, str):
        stripped = strip_wrapping_quotes(quote)
        if stripped != quote.strip():
            repairs.append("strip_quote_marks")
        fields["quote"] = stripped
    missing = [k for k, v in fields.items() if not isinstance(v, str) or not v.strip()]
    if missing:
        raise ChatOutputError(
            f"Emu3-Chat answer lacks {', '.join(missing)} (parsed by {parsed.method})",
            "plan_missing_field",
        )
    text, repair = insert_quote(fields["text"], fields["quote"])
    if repair:
        repairs.append(repair)
    return ChatResult(text=text, t2i=fields["t2i"].strip(), quote=fields["quote"], repairs=repairs)


# -- speech plan -------------------------------------------------------------------------------

#: the official runner's speaker for every Emu3 utterance (it asks the model for no voice)
OFFICIAL_VOICE: dict[str, str] = {
    "speaker": "Narrator",
    "emotion": "neutral",
    "speed": "normal",
    "pitch": "normal",
    "gender": "female",
}
VOICE_KEYS: tuple[str, ...] = tuple(OFFICIAL_VOICE)


def check_voice(value: Any) -> dict[str, str]:
    """A complete voice from a (possibly partial) mapping; raises ``ValueError`` naming the key."""
    if value is None:
        return dict(OFFICIAL_VOICE)
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping with keys {', '.join(VOICE_KEYS)}, got {value!r}")
    unknown = sorted(str(k) for k in value if k not in OFFICIAL_VOICE)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; known: {', '.join(VOICE_KEYS)}")
    voice = {**OFFICIAL_VOICE, **{k: v for k, v in value.items() if v is not None}}
    speaker = voice["speaker"]
    if not isinstance(speaker, str) or not speaker.strip():
        raise ValueError(f"speaker must be a non-empty string, got {speaker!r}")
    for key, allowed in LABELS.items():
        if voice[key] not in allowed:
            raise ValueError(f"{key} must be one of {', '.join(allowed)}, got {voice[key]!r}")
    return voice


def speech_plan(quote: str, voice: dict[str, str]) -> dict[str, Any]:
    """The plan a TTS expert reads: the quote in the configured voice."""
    return {"speech": {"utterance": quote, **voice}}
