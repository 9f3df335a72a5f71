"""The three instructions of one AnyGPT example (pure functions, no model).

The benchmark's AnyGPT runner asks the chat model three times per example; this module writes those
requests in our own words, with the structure and inputs the runner uses:

1. text: the current page's image tokens, then an instruction for exactly two lines,
   ``Narration: ...`` and ``Speech: ...`` (one or two sentences of narration, a spoken line of 3-12
   words, one example), followed by the current text, the book metadata as JSON and the next-page
   condition as JSON; the answer is started with ``Narration:``;
2. image: the image tokens again, then an instruction to draw the next page, with the current
   text, the narration of pass 1 (the condition JSON when it is empty), the spoken line of pass 1
   when there is one, the metadata and the condition; image generation is forced;
3. speech: text only -- an instruction to speak one line, with the current text, the narration,
   either "say exactly this line" or "make up a fitting line", the metadata and the condition;
   speech generation is forced.

The condition JSON renames ``text_instruction`` to ``"text content"``, in place, as the runner does.
The chat template, the forced modality tags and the image-token string are AnyGPT's own and come
from the checkout (``m_utils.conversation``, ``m_utils.anything2token``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: the answer prefix of the text pass (the model continues after it)
NARRATION_PREFIX = "Narration:"
#: the key the runner gives the condition's ``text_instruction`` in the prompt
TEXT_CONTENT_KEY = "text content"


@dataclass(frozen=True)
class StoryFields:
    """What every instruction repeats: the current text and two JSON blocks."""

    current_text: str
    metadata_json: str
    condition_json: str


def condition_for_prompt(conditions: Mapping[str, Any] | None) -> dict[str, Any]:
    """The next-page condition as the runner shows it: ``text_instruction`` becomes
    ``"text content"`` at the same position, every other key unchanged."""
    return {
        (TEXT_CONTENT_KEY if key == "text_instruction" else key): value
        for key, value in (conditions or {}).items()
    }


def story_fields(
    current_text: str | None,
    metadata: Mapping[str, Any] | None,
    conditions: Mapping[str, Any] | None,
) -> StoryFields:
    return StoryFields(
        current_text=(current_text or "").strip(),
        metadata_json=json.dumps(dict(metadata or {}), ensure_ascii=False),
        condition_json=json.dumps(condition_for_prompt(conditions), ensure_ascii=False),
    )


def _context(fields: StoryFields, *middle: str) -> list[str]:
    return [
        f"Text of the current page:\n{fields.current_text}",
        *middle,
        f"Book metadata (JSON):\n{fields.metadata_json}",
        f"Condition for the next page (JSON):\n{fields.condition_json}",
    ]


def text_instruction(fields: StoryFields) -> str:
    """Pass 1: the two-line answer (narration, spoken line)."""
    rules = "\n".join(
        (
            "Continue a children's picture book by writing its next page.",
            "The picture above is the current page.",
            "Base the next page on that picture, the text of the current page, the book metadata"
            " and the condition for the next page.",
            "Reply with exactly two lines and nothing more.",
            "The first line starts with 'Narration:' followed by the narration of the next page,"
            " written as story text.",
            "The second line starts with 'Speech:' followed by one short line that a fitting"
            " character says aloud.",
            "Write the narration the way it would be printed in the book, never as an instruction,"
            " an explanation or a scene label.",
            "The narration has one or two short sentences; the spoken line has 3 to 12 words.",
            "After 'Speech:' put only the spoken words: no speaker name, list marker, JSON, image"
            " tokens or speech tokens.",
            "Do not open with phrases about the task such as 'Here is the next page' or"
            " 'This scene shows'.",
        )
    )
    example = "\n".join(
        (
            "For example:",
            "Narration: The little bear climbs onto the log and waves at the ducks below.",
            "Speech: Come and play with me!",
        )
    )
    return "\n\n".join([rules, example, *_context(fields)])


def image_instruction(fields: StoryFields, narration: str, speech_line: str) -> str:
    """Pass 2: the next illustration (image generation is forced by the chat template)."""
    head = "\n".join(
        (
            "Draw the illustration of the next page of the same children's picture book.",
            "The picture above is the current page: keep its style and its characters consistent.",
            "Answer with the image only.",
        )
    )
    middle = [f"Narration of the next page:\n{narration or fields.condition_json}"]
    if speech_line:
        middle.append(f"A line a character says in this scene:\n{speech_line}")
    return "\n\n".join([head, *_context(fields, *middle)])


def speech_instruction(fields: StoryFields, narration: str, speech_line: str) -> str:
    """Pass 3 (text only): one spoken line (speech generation is forced by the chat template)."""
    head = "\n".join(
        (
            "Produce the spoken audio of one short line said by a character in the next scene"
            " of a children's picture book.",
            "Answer with speech audio only, no text.",
        )
    )
    middle = [f"Narration of the next page:\n{narration or fields.condition_json}"]
    if speech_line:
        middle.append(f"Say exactly this line:\n{speech_line}")
    else:
        middle.append(
            "Make up one short line that a fitting character would say here, and say it naturally."
        )
    return "\n\n".join([head, *_context(fields, *middle)])


def with_image(image_tokens: str, instruction: str) -> str:
    """A user message holding the current page's image tokens, then the instruction."""
    return f"{image_tokens}\n{instruction}"


__all__ = [
    "NARRATION_PREFIX",
    "StoryFields",
    "TEXT_CONTENT_KEY",
    "condition_for_prompt",
    "image_instruction",
    "speech_instruction",
    "story_fields",
    "text_instruction",
    "with_image",
]
