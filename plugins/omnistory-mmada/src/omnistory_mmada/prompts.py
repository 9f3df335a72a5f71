"""What MMaDA is asked: the understanding (MMU) chat and the text-to-image prompt.  Pure functions.

The structure follows the official Omni-StoryBench MMaDA runner (a system message that asks for a
JSON object with the keys ``text``, ``quote``, ``t2i`` and ``speech_metadata`` and shows one worked
example; a user message with the book's title, style and main characters, the current page's text
and the next-page conditions reduced to scene, narrative goal, ambient mood and character states);
the wording is ours.  The T2I suffix is the official one: it is part of what the model is given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: keys the model must return (the official runner's schema)
RESPONSE_KEYS: tuple[str, ...] = ("text", "quote", "t2i", "speech_metadata")

#: appended to the model's own t2i prompt before MMaDA draws it (official)
T2I_SUFFIX = ", masterpiece, children's storybook illustration, best quality"

#: at most this many book characters are named, and this many next-page characters described
MAX_BOOK_CHARACTERS = 5
MAX_CONDITION_CHARACTERS = 3

_EXAMPLE = {
    "text": (
        "Tomas set the paper boat on the pond and gave it a gentle push. The wind caught its "
        'sail at once. "Sail all the way to the island!" he shouted.'
    ),
    "quote": "Sail all the way to the island!",
    "t2i": (
        "Storybook illustration of a small boy in a yellow raincoat kneeling at the edge of a "
        "green pond, a paper sailboat drifting towards a tiny island, willow trees in the "
        "background, soft afternoon light, warm colorful style"
    ),
    "speech_metadata": {
        "speaker": {
            "name": "Tomas",
            "line": "Sail all the way to the island!",
            "emotion": "happy",
            "speed": "fast",
            "pitch": "high",
            "gender": "male",
        }
    },
}

SYSTEM_PROMPT = (
    "You continue a children's picture book: from the page you are shown, you write the next "
    "page.\n\n"
    "Answer with a single JSON object and no other text. It must have these keys:\n"
    '- "text": the narration of the next page\n'
    '- "quote": the one line a character says aloud on that page\n'
    '- "t2i": a description of the next page\'s picture for an image generator\n'
    '- "speech_metadata": who says the quote and how\n\n'
    "An example of the format, from another book:\n"
    f"{json.dumps(_EXAMPLE, indent=2, ensure_ascii=False)}\n\n"
    "Rules:\n"
    "- Write the JSON object only.\n"
    "- Build the page from the story information you are given.\n"
    '- "t2i" describes what can be seen in the picture; it is not an instruction and not part '
    "of the schema.\n"
    "- Do not repeat the example; write content for this book."
)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def book_summary(metadata: Mapping[str, Any] | None) -> tuple[str, str, str]:
    """(title, style, main characters) of the book.

    Title: ``title``, else ``topic``; style: ``genre``, else ``style``, else ``theme``; characters:
    the names of the first five book characters (objects with a ``name`` or plain strings).
    """
    if not isinstance(metadata, Mapping):
        metadata = {}
    title = _text(metadata.get("title")) or _text(metadata.get("topic")) or "(untitled)"
    style = (
        _text(metadata.get("genre"))
        or _text(metadata.get("style"))
        or _text(metadata.get("theme"))
        or "children's picture book"
    )
    names: list[str] = []
    characters = metadata.get("characters")
    for character in characters[:MAX_BOOK_CHARACTERS] if isinstance(characters, list) else []:
        if isinstance(character, Mapping) and character.get("name"):
            names.append(str(character["name"]).strip())
        elif isinstance(character, str) and character.strip():
            names.append(character.strip())
    return title, style, ", ".join(names) if names else "(none given)"


def condition_lines(conditions: Mapping[str, Any] | None) -> list[str]:
    """The next-page conditions as ``Scene:``, ``Narrative goal:``, ``Ambient mood:`` and
    ``Character states:`` lines (the first three characters: name, emotion, action)."""
    if not isinstance(conditions, Mapping):
        conditions = {}
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
    for character in characters[:MAX_CONDITION_CHARACTERS] if isinstance(characters, list) else []:
        if not isinstance(character, Mapping):
            continue
        state = str(character.get("name") or "someone").strip()
        emotion, action = _text(character.get("emotion")), _text(character.get("action"))
        if emotion:
            state += f" ({emotion})"
        if action:
            state += f": {action}"
        states.append(state)
    if states:
        lines.append("Character states: " + "; ".join(states))
    return lines


def user_prompt(
    metadata: Mapping[str, Any] | None,
    current_text: str,
    conditions: Mapping[str, Any] | None,
) -> str:
    """The user turn: book summary, the current page's text, the next page's conditions."""
    title, style, characters = book_summary(metadata)
    notes = condition_lines(conditions) or ["Carry the story on from the current page."]
    return "\n".join(
        [
            f"Book title: {title}",
            f"Book style: {style}",
            f"Main characters: {characters}",
            "",
            "Text of the current page:",
            (current_text or "").strip(),
            "",
            "What the next page needs:",
            *notes,
            "",
            "Reply with the JSON object only.",
        ]
    )


def mmu_messages(
    metadata: Mapping[str, Any] | None,
    current_text: str,
    conditions: Mapping[str, Any] | None,
) -> list[dict[str, str]]:
    """The chat the tokenizer's template turns into the text part of the MMU input."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_prompt(metadata, current_text, conditions)},
    ]


def t2i_prompt(description: str) -> str:
    """What MMaDA draws: the model's own description on one line, ending with a full stop, then the
    official quality suffix."""
    prompt = " ".join(description.split())
    if not prompt.endswith("."):
        prompt += "."
    return prompt + T2I_SUFFIX
