"""The text prompt of the joint pass, the inputs it shows, and the per-example seed (pure).

The benchmark's Dynin-Omni runner writes one prompt per example with the rules of the
orchestration planners' system prompt (a short next page consistent with the story, an
illustration matching the scene and characters, exactly one dialogue quote in the text), then the
book metadata as JSON, the current page's text, and the next-page condition as JSON (its
``text_instruction`` shown under the key ``text content``).  The wording below is ours; the
structure and the inputs follow the runner.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

METADATA_KEYS: tuple[str, ...] = (
    "genre",
    "topic",
    "style",
    "narrative_tense",
    "narrative_perspective",
)

INSTRUCTIONS = (
    "You continue a picture storybook by one page. Using the text and the illustration of the "
    "current page and the conditions set for the next page, create the next page: its text, its "
    "illustration and its speech.\n"
    "Rules:\n"
    "- Keep the next page's text short and true to the story so far.\n"
    "- Let the illustration show the scene and the characters the conditions describe.\n"
    "- The text must include exactly one line of character dialogue in quotation marks.\n"
    "- The conditions may give the scene, the characters with their actions and feelings, and the "
    "ambient sound."
)


def story_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The book metadata the runner shows: five descriptive fields, then the character list."""
    metadata = metadata or {}
    shown = {key: metadata.get(key, "") for key in METADATA_KEYS}
    shown["characters"] = metadata.get("characters") or []
    return shown


def next_page_condition(conditions: dict[str, Any] | None) -> dict[str, Any]:
    """The next-page condition the runner shows; ``text_instruction`` becomes ``text content``."""
    conditions = conditions or {}
    return {
        "characters": conditions.get("characters") or [],
        "scene": conditions.get("scene", ""),
        "text content": conditions.get("text_instruction", ""),
        "ambient_sound": conditions.get("ambient_sound", ""),
    }


def build_prompt(
    metadata: dict[str, Any] | None, current_text: str, conditions: dict[str, Any] | None
) -> str:
    """The prompt of one example (tokenized between ``<bos>`` and ``<eos>``, left padded)."""
    book = json.dumps(story_metadata(metadata), ensure_ascii=False)
    condition = json.dumps(next_page_condition(conditions), ensure_ascii=False)
    return (
        f"{INSTRUCTIONS}\n\n"
        f"Book metadata:\n- {book}\n\n"
        f"Text of the current page:\n- {current_text}\n\n"
        f"Conditions for the next page:\n- {condition}"
    )


def example_seed(seed: int, item: dict[str, Any]) -> int:
    """The sampling seed of one example: ``seed`` plus a stable 32-bit hash of its inputs.

    The official runner seeds ``base_seed + dataset_index``; the engine hands a component only the
    inputs it reads (no row index), so the index is replaced by a hash of those inputs: the same
    example gets the same seed in every run, whatever else the run contains.
    """
    image = item.get("current_image")
    payload = json.dumps(
        [
            getattr(image, "sha256", None),
            item.get("current_text") or "",
            item.get("metadata") or {},
            item.get("conditions") or {},
        ],
        ensure_ascii=True,
        sort_keys=True,
    )
    digest = hashlib.sha256(payload.encode("ascii")).digest()
    return int(seed) + int.from_bytes(digest[:4], "big")
