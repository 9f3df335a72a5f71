"""From MMaDA's decoded answer to narration, image description and speech plan.  Pure functions.

The rules are the official Omni-StoryBench MMaDA runner's (our implementation):

1. locate a JSON object: the whole answer, a fenced block, the slice from the first ``{`` to the
   last ``}``, else salvage the ``text``, ``quote`` and ``t2i`` strings and the
   ``speech_metadata`` object key by key;
2. ``text`` is required; ``quote`` is required (taken from ``speech_metadata.speaker.line`` when
   the ``quote`` key is absent) -- without them the example is lost (all modalities);
3. the quote is put into the narration when the narration does not contain it;
4. the ``t2i`` description must pass a usability check, else the example is lost (all modalities:
   the official runner never rebuilds a prompt the model did not give);
5. speech labels outside the label sets become the official defaults (speaker ``Narrator``,
   ``neutral``, ``normal``, ``normal``, ``female``); the spoken line is always the quote.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from omnistory_core.api import ComponentError, json_object_end

#: the official runner's fallback voice when the model gives no (valid) speech labels
DEFAULT_SPEAKER: dict[str, str] = {
    "speaker": "Narrator",
    "emotion": "neutral",
    "speed": "normal",
    "pitch": "normal",
    "gender": "female",
}
#: the labels the official runner accepts (exact, case-sensitive match)
SPEECH_LABELS: dict[str, frozenset[str]] = {
    "emotion": frozenset({"angry", "happy", "neutral", "sad"}),
    "speed": frozenset({"slow", "normal", "fast"}),
    "pitch": frozenset({"low", "normal", "high"}),
    "gender": frozenset({"female", "male"}),
}

#: pairs of quote marks stripped from around a quote (one pair, as the official runner)
_WRAPPING = (("\u201c", "\u201d"), ('"', '"'), ("'", "'"), ("\u2018", "\u2019"))

#: a quoted span in narration: straight or curly double quotes, single quotes that are not
#: apostrophes inside a word, corner brackets
QUOTED_SPAN = re.compile(
    r'"(?:\\.|[^"\\])+"'
    r"|\u201c[^\u201d]+\u201d"
    r"|(?<!\w)'(?:\\.|[^'\\]|(?<=\w)'(?=\w))+?'(?!\w)"
    r"|\u2018(?:\\.|[^\u2019\\]|(?<=\w)\u2019(?=\w))+?\u2019(?!\w)"
    r"|\u300c[^\u300d]+\u300d"
    r"|\u300e[^\u300f]+\u300f"
)

#: the usability check of a t2i description (official heuristic)
MIN_T2I_WORDS = 6
_PLACEHOLDERS = frozenset({"...", "null", "none", "<t2i>", "dummy", "a", "an"})
_SPEECH_OPENINGS = ("oh", "i'm", "i am", "he said", "she said", "rabbit said", "the rabbit said")
_OPENING_QUOTES = ('"', "\u201c", "'", "\u2018")
VISUAL_WORDS: tuple[str, ...] = (
    "illustration",
    "scene",
    "background",
    "lighting",
    "storybook",
    "style",
    "character",
    "indoor",
    "outdoor",
    "warm",
    "colorful",
    "expression",
    "pose",
    "detailed",
    "rabbit",
    "animal",
    "forest",
    "room",
    "garden",
    "moonlight",
    "composition",
)


@dataclass
class Interpreted:
    """What one MMU answer gives: the narration, the t2i description, the speech plan."""

    text: str
    quote: str
    t2i: str
    speech: dict[str, str]
    repairs: list[str] = field(default_factory=list)


# -- locating the JSON object --------------------------------------------------------------------
def _object(candidate: str) -> dict[str, Any] | None:
    try:
        value = json.loads(candidate)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _balanced_object(text: str, start: int) -> str | None:
    """The ``{...}`` starting at ``start`` (braces inside JSON strings ignored), or None."""
    end = json_object_end(text, start)
    return None if end is None else text[start : end + 1]


def _salvage_string(text: str, key: str) -> str | None:
    match = re.search(rf'"{re.escape(key)}"\s*:\s*"((?:\\.|[^"\\])*)"', text, flags=re.DOTALL)
    if match is None:
        return None
    try:
        return json.loads(f'"{match.group(1)}"')
    except ValueError:
        return match.group(1)


def locate_json(answer: str) -> tuple[dict[str, Any], str]:
    """The answer's JSON object and how it was found (``json``, ``fenced``, ``braces``,
    ``salvaged``); a :class:`ComponentError` (``plan_json_error``) when nothing is found."""
    text = (answer or "").strip()
    found = _object(text)
    if found is not None:
        return found, "json"
    fence = re.search(r"```(?:json)?\s*([\s\S]*?)\s*```", text, flags=re.IGNORECASE)
    if fence:
        inner = fence.group(1).strip()
        found = _object(inner)
        if found is not None:
            return found, "fenced"
        text = inner
    first, last = text.find("{"), text.rfind("}")
    if first != -1 and last > first:
        found = _object(text[first : last + 1])
        if found is not None:
            return found, "braces"
    salvaged: dict[str, Any] = {}
    for key in ("text", "quote", "t2i"):
        value = _salvage_string(text, key)
        if value is not None:
            salvaged[key] = value
    key_at = re.search(r'"speech_metadata"\s*:\s*(?=\{)', text)
    if key_at:
        speech = _balanced_object(text, key_at.end())
        speech_obj = _object(speech) if speech else None
        if speech_obj is not None:
            salvaged["speech_metadata"] = speech_obj
    if salvaged:
        return salvaged, "salvaged"
    raise ComponentError(
        f"MMaDA's answer holds no JSON object: {excerpt(answer)}", category="plan_json_error"
    )


def excerpt(value: Any, limit: int = 160) -> str:
    """A one-line, bounded rendering of model output for failure messages."""
    text = " ".join(str(value if value is not None else "").split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


# -- fields ------------------------------------------------------------------------------------
def strip_wrapping_quotes(value: Any) -> str:
    """The line without one pair of quote marks around it."""
    text = str(value or "").strip()
    if len(text) >= 2:
        for left, right in _WRAPPING:
            if text.startswith(left) and text.endswith(right):
                return text[1:-1].strip()
    return text


def _speaker_object(speech_metadata: Any) -> dict[str, Any]:
    if isinstance(speech_metadata, str):
        speech_metadata = _object(speech_metadata) or {}
    if not isinstance(speech_metadata, dict):
        return {}
    speaker = speech_metadata.get("speaker")
    return speaker if isinstance(speaker, dict) else {}


def insert_quote(text: str, quote: str) -> tuple[str, bool]:
    """The narration carrying the quote: unchanged when it contains it, else its first quoted
    span replaced by the quote, else the quote appended.  Returns (text, changed)."""
    text = text.strip()
    if quote in text:
        return text, False
    if QUOTED_SPAN.search(text):
        return QUOTED_SPAN.sub(lambda _m: f'"{quote}"', text, count=1), True
    if text.endswith((".", "!", "?")):
        return f'{text} "{quote}"', True
    return f'{text}. "{quote}"', True


def flatten_t2i(value: Any) -> str:
    """The model's ``t2i`` value as one line of text (a list is joined, an object rendered as
    ``key: value`` pairs, an ``image`` object by its descriptive fields)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, list):
        return " ".join(str(v).strip() for v in value if str(v).strip())
    if isinstance(value, dict):
        image = value.get("image")
        if isinstance(image, dict):
            keys = ("name", "type", "color", "size", "action", "emotion", "scene", "background")
            return ", ".join(str(image[k]) for k in keys if image.get(k))
        parts = []
        for key, item in value.items():
            if isinstance(item, str | int | float | bool):
                parts.append(f"{key}: {item}")
            elif isinstance(item, dict):
                inner = ", ".join(
                    f"{k}: {v}" for k, v in item.items() if isinstance(v, str | int | float | bool)
                )
                if inner:
                    parts.append(f"{key}: {inner}")
        return "; ".join(parts)
    return str(value).strip()


def t2i_problem(prompt: str, quote: str = "") -> str | None:
    """Why a t2i description cannot be drawn (the official heuristic), or None when usable."""
    text = (prompt or "").strip()
    low = text.lower()
    if not text:
        return "empty"
    if low in _PLACEHOLDERS:
        return "a placeholder"
    if len(text.split()) < MIN_T2I_WORDS:
        return f"fewer than {MIN_T2I_WORDS} words"
    if quote and low == quote.strip().lower():
        return "the quote itself"
    if text.startswith(_OPENING_QUOTES):
        return "starts with a quote mark"
    if low.startswith(_SPEECH_OPENINGS):
        return "reads like speech"
    if any(char in text for char in "{}[]"):
        return "contains braces or brackets"
    if " + " in text or '": "' in text:
        return "looks like schema or code"
    if not any(word in low for word in VISUAL_WORDS):
        return "names nothing visual"
    return None


def speech_plan(speech_metadata: Any, quote: str) -> tuple[dict[str, str], list[str]]:
    """The plan's ``speech`` object and the defaults applied.  The utterance is the quote."""
    speaker = _speaker_object(speech_metadata)
    repairs: list[str] = []
    name = speaker.get("name")
    if name and str(name).strip():
        name = str(name).strip()
    else:
        name = DEFAULT_SPEAKER["speaker"]
        repairs.append(f"speech.speaker missing: default {name!r}")
    plan = {"utterance": quote, "speaker": name}
    for label, allowed in SPEECH_LABELS.items():
        value = speaker.get(label)
        if isinstance(value, str) and value in allowed:
            plan[label] = value
        else:
            plan[label] = DEFAULT_SPEAKER[label]
            what = "missing" if not value else f"{value!r} is not a label"
            repairs.append(f"speech.{label} {what}: default {plan[label]!r}")
    return plan, repairs


def interpret(answer: str) -> Interpreted:
    """The narration, t2i description and speech plan of one decoded MMU answer.

    Raises :class:`ComponentError`: ``plan_json_error`` (no JSON), ``plan_missing_field`` (no
    text or no quote), ``unusable_image_prompt`` (the t2i description fails the check).
    """
    obj, how = locate_json(answer)
    repairs = [] if how == "json" else [f"JSON found by {how}"]
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ComponentError(
            f"MMaDA's answer has no text: {excerpt(answer)}", category="plan_missing_field"
        )
    quote = obj.get("quote")
    if not quote:
        quote = _speaker_object(obj.get("speech_metadata")).get("line")
        if quote:
            repairs.append("quote taken from speech_metadata.speaker.line")
    quote = strip_wrapping_quotes(quote)
    if not quote:
        raise ComponentError(
            f"MMaDA's answer has no quote: {excerpt(answer)}", category="plan_missing_field"
        )
    text, inserted = insert_quote(text, quote)
    if inserted:
        repairs.append("quote inserted into the text")
    description = flatten_t2i(obj.get("t2i"))
    problem = t2i_problem(description, quote)
    if problem is not None:
        raise ComponentError(
            f"no usable t2i prompt ({problem}): {excerpt(obj.get('t2i'))}",
            category="unusable_image_prompt",
        )
    speech, speech_repairs = speech_plan(obj.get("speech_metadata"), quote)
    return Interpreted(text, quote, description, speech, repairs + speech_repairs)
