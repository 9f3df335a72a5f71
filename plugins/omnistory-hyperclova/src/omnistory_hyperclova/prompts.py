"""What the ``hyperclova`` backbone sends and how it reads the answers (pure functions).

One example takes three chat requests, following the structure of the benchmark's own
HyperCLOVA X Omni runner (the prompts below are ours):

1. **text** -- the current page image and a prompt asking for two labelled lines,
   ``NARRATION: ...`` and ``SPEECH: ...``, given the current text, the book metadata (JSON) and the
   next-page condition (JSON);
2. **image** -- a system prompt that makes the model answer through the ``t2i_model_generation``
   function tool, the current image, and a prompt with the current text, the generated narration,
   the metadata and the condition;
3. **speech** -- text only: the SPEECH line to be read aloud, with a voice direction built from the
   condition's characters (emotion, speech intent, action, visibility) and the ambient sound.

The tool definition (name, description, argument schema) is OmniServe's protocol and is sent as
OmniServe documents it: the model was trained to fill ``discrete_image_token`` with its vision
tokens, which the server decodes and replaces by a (signed) image URL.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: the function tool OmniServe turns into an image (name and schema are the server's protocol)
IMAGE_TOOL_NAME = "t2i_model_generation"
IMAGE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": IMAGE_TOOL_NAME,
        "description": (
            "Generates an RGB image based on the provided discrete image representation."
        ),
        "parameters": {
            "type": "object",
            "required": ["discrete_image_token"],
            "properties": {
                "discrete_image_token": {
                    "type": "string",
                    "description": (
                        "A serialized string of discrete vision tokens, encapsulated by special "
                        "tokens. The format must be strictly followed: <|discrete_image_start|>"
                        "<|vision_ratio_4:3|><|vision_token|><|visionaaaaa|><|visionbbbbb|>... "
                        "<|visionzzzzz|><|vision_eol|><|vision_eof|><|discrete_image_end|>."
                    ),
                    "minLength": 1,
                }
            },
        },
    },
}

IMAGE_SYSTEM_PROMPT = (
    "You are an assistant that makes pictures. Whenever you are asked to draw a picture, or to "
    "change, continue or restyle a given one, reply by calling the t2i_model_generation tool with "
    "the new image. Always answer with that tool call."
)


def _json(value: Any) -> str:
    return json.dumps(value if value is not None else {}, ensure_ascii=False, indent=2)


def text_prompt(
    current_text: str, metadata: Mapping[str, Any] | None, conditions: Mapping[str, Any] | None
) -> str:
    """Request 1: the next page's narration and one spoken line, as two labelled lines."""
    return f"""This is a page of a children's picture book: its picture is attached, its text
is below. Write the page that comes next, following the book's metadata and the condition for
the next page.

Answer with exactly these two lines:
NARRATION: <the story text of the next page, in natural sentences>
SPEECH: <one short line that a character says aloud on the next page>

Rules:
- Write in the same language as the current page text.
- No JSON and no explanations.
- Do not write speaker names; the SPEECH line holds only the spoken words.
- Keep the SPEECH line short and natural.

Current page text:
{current_text}

Book metadata:
{_json(metadata)}

Condition for the next page:
{_json(conditions)}""".strip()


def image_prompt(
    current_text: str,
    narration: str,
    metadata: Mapping[str, Any] | None,
    conditions: Mapping[str, Any] | None,
) -> str:
    """Request 2: the next illustration, with the current page's picture as the visual reference."""
    return f"""Draw the picture for the next page of this children's picture book.

The attached picture is the current page: keep its art style, keep the characters looking the same,
and continue its scene.

Current page text:
{current_text}

Next page text:
{narration}

Book metadata:
{_json(metadata)}

Condition for the next page:
{_json(conditions)}""".strip()


def voice_direction(conditions: Mapping[str, Any] | None) -> str:
    """One line per next-page character (emotion, speech intent, action, visibility when given)
    and one for the ambient sound; empty when the condition has none of these."""
    conditions = conditions or {}
    lines = []
    for character in conditions.get("characters") or []:
        if not isinstance(character, Mapping):
            continue
        parts = [f"- {character.get('name') or 'Unknown'}"]
        for key in ("emotion", "speech_intent", "action", "visibility"):
            value = character.get(key)
            if value:
                parts.append(f"{key}: {value}")
        lines.append("; ".join(parts))
    if conditions.get("ambient_sound"):
        lines.append(f"- ambient sound: {conditions['ambient_sound']}")
    return "\n".join(lines)


def speech_prompt(line: str, conditions: Mapping[str, Any] | None) -> str:
    """Request 3 (text only): read the SPEECH line aloud, directed by the next page's condition."""
    prompt = f"Speak this line out loud:\n{line}\n"
    direction = voice_direction(conditions)
    if direction:
        prompt += f"\nHow to voice it (the characters of the scene):\n{direction}\n"
    return prompt.strip()


def prompts_digest() -> str:
    """SHA-256 of every fixed wording sent (part of the cache key: a wording change re-runs)."""
    probe = {
        "characters": [
            {"name": "n", "emotion": "e", "speech_intent": "s", "action": "a", "visibility": "v"}
        ],
        "ambient_sound": "x",
    }
    parts = [
        text_prompt("{t}", {"m": 1}, probe),
        image_prompt("{t}", "{n}", {"m": 1}, probe),
        speech_prompt("{l}", probe),
        IMAGE_SYSTEM_PROMPT,
        json.dumps(IMAGE_TOOL, sort_keys=True),
    ]
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


def reasoning_body(reasoning: bool, budget: int) -> dict[str, Any]:
    """The request fields (sent through ``extra_body``) that switch reasoning on or off.

    On, as the benchmark runner sends it: chat-template ``thinking`` on, special tokens kept so the
    server's reasoning parser can split the reasoning off, and ``thinking_token_budget`` when > 0.
    Off: ``chat_template_kwargs.skip_reasoning`` (what OmniServe documents for Track B).
    """
    if not reasoning:
        return {"chat_template_kwargs": {"skip_reasoning": True}}
    body: dict[str, Any] = {
        "chat_template_kwargs": {"thinking": True},
        "skip_special_tokens": False,
    }
    if budget > 0:
        body["thinking_token_budget"] = int(budget)
    return body


# -- reading the text answer ----------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)
_SPECIAL = re.compile(r"<\|[A-Za-z_]+\|>")
_EDGES = re.compile(r"^[\s>#*\-•–—`_]+|[\s*_`]+$")
_LABEL = re.compile(r"^(NARRATION|SPEECH)\s*(?:[:：]\s*|$)", re.IGNORECASE)
_STAGE_DIRECTION = re.compile(r"^[(\[].*[)\]]$", re.DOTALL)


def strip_reasoning(text: str | None) -> str:
    """The answer without a reasoning block that leaked into the content (``<think>...</think>``,
    or an unterminated ``<think>`` cut by the token limit) and without special-token markers."""
    cleaned = _THINK.sub("", text or "")
    if "<think>" in cleaned:
        cleaned = cleaned.split("<think>", 1)[0]
    cleaned = cleaned.replace("</think>", "")
    return _SPECIAL.sub("", cleaned).strip()


def _clean(line: str) -> str:
    return _EDGES.sub("", line).replace("**", "").strip()


def _squash(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class TextAnswer:
    """The parsed text answer: ``narration`` and ``speech`` ("" when absent)."""

    narration: str
    speech: str
    labelled: bool


def parse_text_answer(raw: str | None) -> TextAnswer:
    """The first NARRATION and the first SPEECH of the answer.

    * decoration (markdown bullets, bold, quotes blocks) around lines and labels is ignored;
    * a label alone on its line takes the next non-empty line as its value;
    * the first pair wins (the model sometimes goes on to write further pages);
    * a SPEECH that is only a bracketed stage direction is passed over for a later speakable one;
    * only a fully unlabelled answer falls back to position (line 1 narration, line 2 speech): with
      labels, a missing SPEECH stays missing and is never copied from the narration.
    """
    lines = [_clean(line) for line in strip_reasoning(raw).splitlines()]
    lines = [line for line in lines if line]
    found: dict[str, list[str]] = {"NARRATION": [], "SPEECH": []}
    labelled = False
    i = 0
    while i < len(lines):
        match = _LABEL.match(lines[i])
        if not match:
            i += 1
            continue
        labelled = True
        value = _squash(_clean(lines[i][match.end() :]))
        j = i + 1
        while not value and j < len(lines) and not _LABEL.match(lines[j]):
            value = _squash(lines[j])
            j += 1
        if value:
            found[match.group(1).upper()].append(value)
        i = max(i + 1, j)
    if not labelled:
        return TextAnswer(
            narration=_squash(lines[0]) if lines else "",
            speech=_squash(lines[1]) if len(lines) > 1 else "",
            labelled=False,
        )
    speeches = found["SPEECH"]
    speech = next(
        (s for s in speeches if not _STAGE_DIRECTION.match(s)), speeches[0] if speeches else ""
    )
    return TextAnswer(narration=(found["NARRATION"] or [""])[0], speech=speech, labelled=True)


# -- reading the media answers --------------------------------------------------------------------


def redact_url(url: str) -> str:
    """A URL without its query and fragment (signed URLs carry credentials there)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    tail = "?..." if parts.query else ""
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", "")) + tail


@dataclass(frozen=True)
class MediaRef:
    """Where a generated medium is: a downloadable ``url``, inline ``data``, or the ``problem``."""

    url: str | None = None
    data: bytes | None = None
    problem: str | None = None
    #: retrying the request cannot help (e.g. the server is not configured to sign URLs)
    final: bool = False


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return value


def _location(value: str, what: str) -> MediaRef:
    value = value.strip()
    if value.startswith(("http://", "https://")):
        return MediaRef(url=value)
    if value.startswith("s3://"):
        return MediaRef(
            problem=f"the server returned a storage location ({redact_url(value)}) instead of a "
            f"downloadable URL for the {what}: its object storage does not sign URLs",
            final=True,
        )
    if "discrete_image_start" in value or "<|vision" in value:
        return MediaRef(
            problem="the model produced image tokens but the server returned no "
            "image URL (vision decoding failed)"
        )
    return MediaRef(problem=f"the {what} location is not a URL: {value[:80]!r}")


def image_ref(message: Any) -> MediaRef:
    """The generated image of an image answer.

    OmniServe replaces the ``discrete_image_token`` argument of the ``t2i_model_generation`` tool
    call by a signed URL of the decoded image (or by ``s3://bucket/key`` when it cannot sign);
    when it also returns ``content_parts``, the tool call's place holds an ``image_url`` part.
    """
    if message is None:
        return MediaRef(problem="the answer has no message")
    calls = _field(message, "tool_calls") or []
    seen_call = False
    for call in calls:
        function = _field(call, "function")
        if _field(function, "name") != IMAGE_TOOL_NAME:
            continue
        seen_call = True
        try:
            args = json.loads(_field(function, "arguments") or "{}")
        except json.JSONDecodeError:
            return MediaRef(problem="the t2i_model_generation call has unparseable arguments")
        value = args.get("discrete_image_token") if isinstance(args, dict) else None
        if isinstance(value, str) and value.strip():
            ref = _location(value, "image")
            if ref.url or ref.final:
                return ref
            fallback = _content_part_url(message)
            return MediaRef(url=fallback) if fallback else ref
    fallback = _content_part_url(message)
    if fallback:
        return MediaRef(url=fallback)
    if seen_call:
        return MediaRef(problem="the t2i_model_generation call carries no image")
    return MediaRef(problem="the model did not call the t2i_model_generation tool")


def _content_part_url(message: Any) -> str | None:
    for part in _field(message, "content_parts") or []:
        if _field(part, "type") == "image_url":
            url = _field(_field(part, "image_url"), "url")
            if isinstance(url, str) and url.startswith(("http://", "https://")):
                return url
    return None


def _b64decode(text: str) -> bytes | None:
    compact = "".join(text.split())
    padded = compact + "=" * (-len(compact) % 4)
    for decode in (base64.urlsafe_b64decode, base64.b64decode):
        try:
            return decode(padded)
        except (binascii.Error, ValueError):
            continue
    return None


def audio_ref(message: Any) -> MediaRef:
    """The generated speech of a speech answer.

    OmniServe puts the URL-safe base64 of a signed WAV URL in ``message.audio.data``; the OpenAI
    format puts the base64 of the audio bytes there, which is accepted too.
    """
    audio = _field(message, "audio") if message is not None else None
    data = _field(audio, "data") if audio is not None else None
    if not isinstance(data, str) or not data.strip():
        return MediaRef(problem="the model returned no audio")
    if data.strip().startswith(("http://", "https://", "s3://")):
        return _location(data, "speech")
    raw = _b64decode(data)
    if raw is None:
        return MediaRef(problem="message.audio.data is not base64")
    if raw[:4] in (b"RIFF", b"fLaC", b"OggS"):
        return MediaRef(data=raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return MediaRef(problem="message.audio.data is neither a URL nor audio bytes")
    return _location(text, "speech")


__all__ = [
    "IMAGE_SYSTEM_PROMPT",
    "IMAGE_TOOL",
    "IMAGE_TOOL_NAME",
    "MediaRef",
    "TextAnswer",
    "audio_ref",
    "image_prompt",
    "image_ref",
    "parse_text_answer",
    "prompts_digest",
    "reasoning_body",
    "redact_url",
    "speech_prompt",
    "strip_reasoning",
    "text_prompt",
    "voice_direction",
]
