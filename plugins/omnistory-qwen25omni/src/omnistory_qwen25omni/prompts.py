"""Conversations and reply parsing of the two Qwen2.5-Omni passes (pure functions, no torch).

The structure follows the official runner (see README): every call opens with the system prompt that
Qwen2.5-Omni requires for speech output; pass 1 asks for one spoken line and gets its audio; pass 2
asks for the next page as JSON ``{text, t2i}``, given that line as text and as audio.  The book
metadata and the next-page condition are inserted as Python reprs, as the official runner does.
The instruction wording is our own.

A conversation is a list of ``{"role", "content": [parts]}`` where a part is
``{"type": "text", "text": ...}``, ``{"type": "image"}`` (the current page) or
``{"type": "audio"}`` (the pass-1 speech); each backend turns the media parts into its own inputs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

#: The system prompt Qwen2.5-Omni needs to produce speech (a fact of the model, used verbatim).
SYSTEM_PROMPT = (
    "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of "
    "perceiving auditory and visual inputs, as well as generating text and speech."
)

PASS1_INSTRUCTIONS = """\
Write only the words that one character speaks aloud on the next page of this storybook.
Rules:
- Give exactly one short line of dialogue that fits the story so far and the next-page condition.
- Do not write narration or describe the scene.
- Reply with that one line and nothing else: no JSON, no speaker name or label, no explanation.
- Do not wrap the line in a reporting clause such as "Pip said ..." or "The fox whispered ...".
Examples of good replies:
- Wait for me, I can't see the path!
- Is anybody still awake up there?"""

PASS2_INSTRUCTIONS = """\
You write the next page of a storybook. From the current page (its text and its picture) and the \
condition for the next page below, write the text of the next page and a prompt for drawing its \
picture.
Rules:
- Keep the next page's text short and consistent with the story so far.
- The picture prompt must show the scene and the characters that the condition describes.
- The condition may give the scene, the characters with their actions and emotions, and the \
ambient sound.
- One line of dialogue for the next page is given below, as text and as audio. The page text and \
the picture prompt must agree with it.
- The page text must contain exactly one line of dialogue, and it must be the given line, word for \
word.
Answer with a JSON object with two keys:
- "text": the text of the next page
- "t2i": the prompt for the image model that will draw the next page
Return the JSON object only, nothing else."""


def _context(metadata: Any, current_text: str, conditions: Any) -> str:
    return (
        f"Book metadata:\n- {metadata}\n\n"
        f"Current page text:\n- {current_text}\n\n"
        f"Next page condition:\n- {conditions}"
    )


def pass1_prompt(metadata: Any, current_text: str, conditions: Any) -> str:
    """Pass 1's user text: our instructions, then the story context."""
    return f"{PASS1_INSTRUCTIONS}\n\n{_context(metadata, current_text, conditions)}"


def pass2_prompt(metadata: Any, current_text: str, conditions: Any, quote: str) -> str:
    """Pass 2's user text: our instructions, the story context and the pass-1 line."""
    return (
        f"{PASS2_INSTRUCTIONS}\n\n{_context(metadata, current_text, conditions)}\n\n"
        f"Given line of dialogue:\n- {quote}"
    )


def _system() -> dict[str, Any]:
    return {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]}


def _user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(parts)}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


IMAGE_PART: dict[str, Any] = {"type": "image"}
AUDIO_PART: dict[str, Any] = {"type": "audio"}


def pass1_messages(metadata: Any, current_text: str, conditions: Any) -> list[dict[str, Any]]:
    """System prompt; the instructions with the context; then the current page picture alone."""
    return [
        _system(),
        _user(text_part(pass1_prompt(metadata, current_text, conditions))),
        _user(dict(IMAGE_PART)),
    ]


def pass2_messages(
    metadata: Any, current_text: str, conditions: Any, quote: str, with_audio: bool = True
) -> list[dict[str, Any]]:
    """System prompt; the instructions with the context; the pass-1 line as text and audio; then
    the current page picture.  ``with_audio=False`` leaves the audio out (none was made)."""
    line = [text_part(f"The line of dialogue as text: {quote}")]
    if with_audio:
        line.append(dict(AUDIO_PART))
    return [
        _system(),
        _user(text_part(pass2_prompt(metadata, current_text, conditions, quote))),
        _user(*line),
        _user(dict(IMAGE_PART)),
    ]


def speak_messages(quote: str) -> list[dict[str, Any]]:
    """The forced-speech fallback: the system prompt and the line alone."""
    return [_system(), _user(text_part(quote))]


# -- pass 1: the spoken line ----------------------------------------------------------------------

_QUOTE_MARKS = "\"'"
#: a quoted span: straight or curly double quotes, single quotes (apostrophes inside words allowed),
#: curly single quotes, CJK corner brackets
_QUOTED_SPAN = re.compile(
    r'"(?P<straight>[^"\n]+)"'
    r"|\u201c(?P<curly>[^\u201d]+)\u201d"
    r"|(?<!\w)'(?P<single>(?:[^'\n]|(?<=\w)'(?=\w))+)'(?!\w)"
    r"|\u2018(?P<curly_single>(?:[^\u2019]|(?<=\w)\u2019(?=\w))+)\u2019"
    r"|\u300c(?P<corner>[^\u300d]+)\u300d"
    r"|\u300e(?P<white_corner>[^\u300f]+)\u300f"
)


def extract_quote(reply: str) -> str:
    """The spoken line in pass 1's reply: its first non-empty line with surrounding quote marks
    stripped; if that leaves nothing, the first quoted span anywhere in the reply; else ``""``."""
    lines = [line.strip() for line in (reply or "").splitlines() if line.strip()]
    first = lines[0] if lines else ""
    quote = first.strip(_QUOTE_MARKS).strip()
    if quote:
        return quote
    match = _QUOTED_SPAN.search(reply or "")
    if match is None:
        return ""
    return next((g.strip() for g in match.groups() if g and g.strip()), "")


# -- pass 2: the next page as JSON ----------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.IGNORECASE | re.DOTALL)
_STRING_FIELD = r'["\']?{key}["\']?\s*:\s*"((?:\\.|[^"\\])*)"'


@dataclass(frozen=True)
class PageParse:
    """Pass 2's reply parsed: the narration and image prompt, or why not (a failure category and
    message).  ``how`` says which recovery found the object."""

    text: str | None
    t2i: str | None
    category: str | None = None
    message: str | None = None
    how: str | None = None

    @property
    def ok(self) -> bool:
        return self.category is None


def _loads_object(candidate: str) -> dict[str, Any] | None:
    try:
        value = json.loads(candidate)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _salvage_fields(raw: str) -> dict[str, Any] | None:
    """``"text": "..."`` and ``"t2i": "..."`` pairs read one by one from a malformed object."""
    found: dict[str, Any] = {}
    for key in ("text", "t2i"):
        match = re.search(_STRING_FIELD.format(key=key), raw, re.DOTALL)
        if match:
            try:
                found[key] = json.loads(f'"{match.group(1)}"')
            except ValueError:
                found[key] = match.group(1)
    return found if len(found) == 2 else None


def locate_page_object(reply: str) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object in pass 2's reply and how it was found: the whole reply, a fenced block,
    the slice from the first ``{`` to the last ``}``, the two string fields read one by one, or
    bare ``"key": value`` pairs wrapped in braces.  ``(None, None)`` when nothing parses."""
    raw = (reply or "").strip()
    obj = _loads_object(raw)
    if obj is not None:
        return obj, "json"
    fence = _FENCE.search(raw)
    if fence:
        obj = _loads_object(fence.group(1).strip())
        if obj is not None:
            return obj, "fenced"
        raw = fence.group(1).strip()
    start, end = raw.find("{"), raw.rfind("}")
    if start != -1 and end > start:
        obj = _loads_object(raw[start : end + 1])
        if obj is not None:
            return obj, "brace_slice"
    obj = _salvage_fields(raw)
    if obj is not None:
        return obj, "fields"
    bare = raw.strip().strip(",")
    if bare and not bare.startswith("{") and ('"text"' in bare or '"t2i"' in bare):
        obj = _loads_object("{" + bare + "}")
        if obj is not None:
            return obj, "wrapped"
    return None, None


def parse_page(reply: str) -> PageParse:
    """Pass 2's reply -> narration and image prompt.  No object: ``plan_json_error``; an object
    without a non-empty string ``text`` and ``t2i``: ``plan_missing_field`` (both are needed, as
    in the official runner)."""
    obj, how = locate_page_object(reply)
    if obj is None:
        return PageParse(None, None, "plan_json_error", "pass 2 returned no parseable JSON object")
    fields = {k: obj.get(k) for k in ("text", "t2i")}
    missing = [k for k, v in fields.items() if not isinstance(v, str) or not v.strip()]
    if missing:
        return PageParse(
            None,
            None,
            "plan_missing_field",
            f"pass 2 JSON lacks a non-empty {' and '.join(missing)}",
            how,
        )
    return PageParse(fields["text"].strip(), fields["t2i"].strip(), how=how)
