"""The project's own planner prompt, in named variants.

A variant decides how the planner is told to write the plan.  Every variant sends the same
inputs (book metadata, the current page's narration, the next page's conditions, and the current
page illustration as an image part), asks for the same JSON fields (the Plan schema) and lists the
same voice label sets (:data:`omnistory_core.contract.LABELS`); they differ in the rules:

* ``default`` (the planners' default): the project's own rules.  The benchmark's reference
  narrations are short children's-book sentences (the paper reports an average of about 107
  characters) while large VLMs left to themselves write 200+ characters, so the narration is one
  or two short sentences of about :data:`REFERENCE_NARRATION_CHARS` characters with no detail the
  conditions do not ask for, and the image prompt must be self-contained (the illustrator may not
  see the current page).
* ``paper_like``: the ``default`` wording with no length or style rule beyond "in the style of the
  book", i.e. the unconstrained setting in which the paper observed 200+ character narrations.
* ``official``: the rules of the official Omni-StoryBench orchestration prompt (the one the
  paper's GPT, Claude, GLM, InternVL and Qwen3.5 systems were run with), restated in the
  project's own words: the narration continues the story coherently and concisely and contains
  exactly one line of dialogue in quotation marks, which is also the line the speech plan speaks;
  the image prompt shows the scene and characters the conditions describe; the conditions may
  give scene, characters, actions, emotions and ambient sound; the voice labels are chosen from
  the enumerated sets.  No length target and none of ``default``'s extra rules.  The paper
  presets (``system=gpt_dev_parler`` ...) select it with ``planner.prompt=official``.

The variant name is a planner parameter (``planner.prompt``) and therefore part of every cache
key; :func:`PromptVariant.digest` hashes the variant's full wording so an edited wording can be
keyed as well.  Rendering never uses ``str.format`` on book data, so braces in metadata are safe.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from omnistory_core.contract import LABELS

REFERENCE_NARRATION_CHARS = 107
"""Average reference narration length reported by the paper (characters)."""

SYSTEM_PROMPT = (
    "You plan the next page of a children's picture book. You are shown one page (its "
    "illustration and its narration), facts about the book, and the conditions the next page "
    "must meet. Three specialists realise your plan: a writer uses your narration as it is, an "
    "illustrator draws from your image prompt, and a voice actor speaks one line with the "
    "voice you describe. Stay faithful to the book: its characters, their looks, its tense, its "
    "narrative perspective and its art style."
)

_IMAGE_RULE = (
    "a self-contained prompt for a text-to-image model that draws the next page: the setting, "
    "each visible character with the appearance they have in the book and in the current "
    "illustration, what they are doing, their expressions, and the book's art style. The "
    "illustrator may not see the current page, so never refer to it (no 'same as before'). "
    "No text, letters or speech bubbles in the picture."
)

_UTTERANCE_RULE = "the exact words spoken, without quotation marks or narration"

_CONDITIONS_RULE = (
    "Use the conditions' text instruction, scene and character actions; the speaker is the "
    "character the conditions give something to say. The voice labels describe how the "
    "line sounds: the speaker's voice (gender), their emotion in this moment, and their "
    "speaking speed and pitch."
)


@dataclass(frozen=True)
class PromptVariant:
    """One wording of the planner prompt.

    ``narration_rule`` is the instruction for the ``narration`` field; ``{chars}`` in it is
    replaced by the target length (``target_chars``) and ``{max_chars}`` by 1.5 times that.
    ``image_rule``, ``utterance_rule`` and ``conditions_rule`` word the ``image_prompt`` field, the
    ``speech.utterance`` field and the closing paragraph on how to use the conditions.
    """

    name: str
    description: str
    narration_rule: str
    target_chars: int | None = None
    image_rule: str = _IMAGE_RULE
    utterance_rule: str = _UTTERANCE_RULE
    conditions_rule: str = _CONDITIONS_RULE

    def rule(self, target_chars: int | None = None) -> str:
        """The narration rule with the length target filled in."""
        chars = target_chars if target_chars is not None else self.target_chars
        text = self.narration_rule
        if chars is not None:
            text = text.replace("{chars}", str(int(chars)))
            text = text.replace("{max_chars}", str(int(round(chars * 1.5))))
        return text

    def digest(self, target_chars: int | None = None) -> str:
        """SHA-256 of everything this variant sends besides the example itself."""
        payload = json.dumps(
            [SYSTEM_PROMPT, render_user_text({}, self, target_chars)], ensure_ascii=False
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


PROMPT_VARIANTS: dict[str, PromptVariant] = {
    v.name: v
    for v in (
        PromptVariant(
            name="default",
            description="length target near the benchmark's references (~107 characters)",
            narration_rule=(
                "the next page's narration, written like the book itself: one or two short "
                "sentences of plain words a young child understands, about {chars} characters "
                "and never more than {max_chars}. Tell only what the conditions ask for; add no "
                "extra scenery, feelings or explanations. If the character's line belongs in "
                "the narration, quote it."
            ),
            target_chars=REFERENCE_NARRATION_CHARS,
        ),
        PromptVariant(
            name="paper_like",
            description="no length rule (the unconstrained setting of the paper's planners)",
            narration_rule="the next page's narration, in the style of the book.",
        ),
        PromptVariant(
            name="official",
            description="the official Omni-StoryBench orchestration rules, in our own words",
            narration_rule=(
                "the next page's narration. It carries the story on coherently, stays "
                "consistent with the book so far, and is kept brief. It includes exactly one "
                "line of dialogue: one character's words between quotation marks, placed inside "
                "the narration, and no other quoted speech. That quoted line is the one the "
                '"speech" field describes.'
            ),
            image_rule=(
                "the prompt given to an image generation model to draw the next page's "
                "illustration; the picture has to show the scene and the characters that the "
                "conditions describe."
            ),
            utterance_rule=(
                "the words of the one quoted line in the narration, as they appear there, "
                "without the quotation marks"
            ),
            conditions_rule=(
                "The conditions for the next page may describe its scene, its characters with "
                "their actions and emotions, and its ambient sound; the next page must satisfy "
                "them. Choose each voice label only from the values listed above."
            ),
        ),
    )
}


def get_variant(name: str) -> PromptVariant:
    """The variant called ``name``; a ``KeyError`` naming the known variants otherwise."""
    try:
        return PROMPT_VARIANTS[name]
    except KeyError:
        known = ", ".join(sorted(PROMPT_VARIANTS))
        raise KeyError(f"unknown planner prompt variant {name!r} (known: {known})") from None


def _labels_text() -> str:
    return "\n".join(
        f'  - "{field}": one of {", ".join(values)}' for field, values in LABELS.items()
    )


def _task_text(variant: PromptVariant, target_chars: int | None) -> str:
    return (
        "Plan the NEXT page. Answer with one JSON object and nothing else, with exactly these "
        "fields:\n"
        f'- "narration": {variant.rule(target_chars)}\n'
        f'- "image_prompt": {variant.image_rule}\n'
        '- "speech": the one line a character says aloud on the next page:\n'
        '  - "speaker": that character\'s name as the book writes it,\n'
        f'  - "utterance": {variant.utterance_rule},\n'
        f"{_labels_text()}\n"
        f"{variant.conditions_rule}"
    )


def _json_block(value: Any) -> str:
    return json.dumps(
        value if value is not None else {},
        ensure_ascii=False,
        indent=2,
        sort_keys=False,
        default=str,
    )


def render_user_text(
    item: dict[str, Any], variant: PromptVariant, target_chars: int | None = None
) -> str:
    """The text part of the planner's user message for one example.

    ``item`` holds the planner inputs (``current_text``, ``metadata``, ``conditions``; the
    image travels as a separate message part).
    """
    return (
        "Book metadata:\n"
        f"{_json_block(item.get('metadata'))}\n\n"
        "Current page narration:\n"
        f"{item.get('current_text') or ''}\n\n"
        "The current page illustration is attached.\n\n"
        "Conditions for the next page:\n"
        f"{_json_block(item.get('conditions'))}\n\n"
        f"{_task_text(variant, target_chars)}"
    )


__all__ = [
    "PROMPT_VARIANTS",
    "REFERENCE_NARRATION_CHARS",
    "SYSTEM_PROMPT",
    "PromptVariant",
    "get_variant",
    "render_user_text",
]
