"""What Omni-Diffusion is asked and how its answers are read: pure functions, no torch.

The structure follows the official Omni-StoryBench runner
(``tools/run_omnistorybench_reinference.py`` of its Omni-Diffusion copy): a planning prompt asking
for four labelled lines (NARRATION, SPEAKER, SPEECH, IMAGE_PROMPT) from the current page text, the
book metadata as JSON and the next-page condition as JSON, followed by the current page's MAGVIT
tokens; a shorter prompt for the spoken line when the first answer has none; a text-to-image
prompt assembled from the plan and the story inputs.  The prose is ours.  The two task
instructions below are not: they are the instructions Omni-Diffusion was fine-tuned with (its
README's SFT data format; the T2I one is also hard-coded in the model's sampler for
classifier-free guidance), so they are used verbatim.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

#: Omni-Diffusion's trained task instruction for text-to-image (model fact, verbatim)
T2I_INSTRUCTION = "Generate an image based on the provided text description."
#: Omni-Diffusion's trained task instruction for text-to-speech (model fact, verbatim)
TTS_INSTRUCTION = "Convert the text to speech."

#: the labels of the planning answer, in order, and the plan keys they fill
LABELS: dict[str, str] = {
    "NARRATION": "narration",
    "SPEAKER": "speaker",
    "SPEECH": "speech",
    "IMAGE_PROMPT": "image_prompt",
}

#: special tokens of the Omni-Diffusion vocabulary (model facts)
IMAGE_START = "<|begin_of_image|>"
IMAGE_END = "<|end_of_image|>"
AUDIO_CODE_0 = "<|audio_0|>"
IMAGE_CODE_0 = "<|image_0|>"
#: a generated image is a 16 x 16 grid of MAGVIT-v2 codes from a codebook of 8192
IMAGE_CODES = 256
IMAGE_CODEBOOK = 8192

#: the official fallbacks (``fallbacks=official``): the speaker and spoken line used when the model
#: wrote none (the line is the official runner's constant; it is what gets spoken)
FALLBACK_SPEAKER = "character"
FALLBACK_SPEECH = "Let's keep going."


# -- inputs ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Story:
    """The inputs of one example the prompts use."""

    current_text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    conditions: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Story:
        return cls(
            current_text=str(item.get("current_text") or "").strip(),
            metadata=dict(item.get("metadata") or {}),
            conditions=dict(item.get("conditions") or {}),
        )

    def metadata_json(self) -> str:
        """The book metadata as the official runner shows it: one ``metadata`` object."""
        m = self.metadata
        book = {
            "genre": m.get("genre", ""),
            "topic": m.get("topic", ""),
            "style": m.get("style", ""),
            "narrative_tense": m.get("narrative_tense", ""),
            "narrative_perspective": m.get("narrative_perspective", ""),
            "characters": m.get("characters") or [],
        }
        return json.dumps({"metadata": book}, ensure_ascii=False, indent=2)

    def condition_json(self) -> str:
        """The next-page condition as the official runner shows it (the text goal under the key
        ``text content``)."""
        c = self.conditions
        condition = {
            "characters": c.get("characters") or [],
            "scene": c.get("scene", ""),
            "text content": c.get("text_instruction", ""),
            "ambient_sound": c.get("ambient_sound", ""),
        }
        return json.dumps(condition, ensure_ascii=False, indent=2)


# -- prompts ---------------------------------------------------------------------------------
def planning_prompt(story: Story) -> str:
    """The planning pass's text; the current page's image tokens follow it on a new line."""
    return (
        "You are continuing a children's picture book: write what happens on the next page.\n"
        "\n"
        "Work from the picture of the current page (given at the end), its text, the details of "
        "the book and the plan for the next page.\n"
        "Stay true to the story so far.\n"
        "Write in the language of the current page's text.\n"
        "\n"
        f"Text of the current page:\n{story.current_text}\n"
        "\n"
        f"Details of the book:\n{story.metadata_json()}\n"
        "\n"
        f"Plan for the next page:\n{story.condition_json()}\n"
        "\n"
        "Answer with exactly these four lines:\n"
        "NARRATION: <the text of the next page, one or two short sentences>\n"
        "SPEAKER: <the character who says the spoken line, or narrator if no named character "
        "fits>\n"
        "SPEECH: <one short line said aloud on the next page>\n"
        "IMAGE_PROMPT: <one detailed sentence describing the picture of the next page>\n"
        "\n"
        "Picture of the current page:"
    )


def recovery_prompt(story: Story, narration: str) -> str:
    """The second planning pass, asking only for the spoken line (the current page's image tokens
    follow it, as in the first pass).  An empty ``narration`` leaves its section out."""
    planned = f"Planned text of the next page:\n{narration}\n\n" if narration else ""
    return (
        "You are writing the one line a character says aloud on the next page of a children's "
        "picture book.\n"
        "\n"
        f"Text of the current page:\n{story.current_text}\n"
        "\n"
        f"{planned}"
        f"Details of the book:\n{story.metadata_json()}\n"
        "\n"
        f"Plan for the next page:\n{story.condition_json()}\n"
        "\n"
        "Answer with exactly these two lines:\n"
        "SPEAKER: <the name of the character who speaks>\n"
        "SPEECH: <one short line said aloud>"
    )


def character_notes(conditions: dict[str, Any]) -> list[str]:
    """``name, emotion, action`` of each next-page character (empty parts left out)."""
    notes = []
    for character in conditions.get("characters") or []:
        if not isinstance(character, dict):
            continue
        parts = [clean(character.get(key)) for key in ("name", "emotion", "action")]
        note = ", ".join(part for part in parts if part)
        if note:
            notes.append(note)
    return notes


def image_description(story: Story, image_prompt: str, narration: str) -> str:
    """The text-to-image prompt: the plan's picture description with the narration, the scene, the
    characters, the style and the topic, and no lettering in the picture.  Scene, style and topic
    are labelled even when empty, as in the official runner."""
    notes = character_notes(story.conditions)
    pieces = [
        "An illustration for a children's picture book.",
        image_prompt,
        f"Narration: {narration}" if narration else "",
        f"Scene: {story.conditions.get('scene', '')}",
        f"Characters: {'; '.join(notes)}" if notes else "",
        f"Style: {story.metadata.get('style', '')}",
        f"Topic: {story.metadata.get('topic', '')}",
        "Do not draw any text, captions or speech bubbles.",
    ]
    return " ".join(piece for piece in pieces if piece).strip()


def t2i_message(description: str) -> str:
    return f"{T2I_INSTRUCTION}\n{description}"


def tts_message(line: str) -> str:
    return f"{TTS_INSTRUCTION}\n{line}"


def image_block(codes: list[int]) -> str:
    """MAGVIT-v2 codes of the current page as Omni-Diffusion's image tokens."""
    return IMAGE_START + "".join(f"<|image_{int(code)}|>" for code in codes) + IMAGE_END


def with_image(message: str, codes: list[int]) -> str:
    """A user message followed, on its own line, by an image."""
    return f"{message}\n{image_block(codes)}"


def chat(message: str) -> str:
    """One user turn in the ChatML format Omni-Diffusion was trained with (the official runner's
    chat template renders exactly this: no system turn, then the assistant's turn opened)."""
    return f"<|im_start|>user\n{message}<|im_end|>\n<|im_start|>assistant\n"


# -- answers ---------------------------------------------------------------------------------
def clean(value: Any) -> str:
    """Whitespace collapsed, surrounding whitespace and quotes removed (``None`` -> "")."""
    text = "" if value is None else str(value)
    return " ".join(text.strip().strip('"').strip("'").split())


_LABEL_LINE = re.compile(r"^\s*([A-Za-z_]+)\s*:(.*)$")


def labelled_field(text: str, label: str) -> str:
    """The value of the first line starting with ``label:`` (any case), continued over the
    following lines up to the next line that starts with a ``WORD:`` label; cleaned."""
    lines = (text or "").splitlines()
    for start, line in enumerate(lines):
        match = _LABEL_LINE.match(line)
        if not match or match.group(1).upper() != label.upper():
            continue
        value = [match.group(2)]
        for following in lines[start + 1 :]:
            if _LABEL_LINE.match(following):
                break
            value.append(following)
        return clean("\n".join(value))
    return ""


def parse_answer(text: str) -> dict[str, str]:
    """The four plan fields of a planning answer ("" where a line is missing)."""
    return {key: labelled_field(text, label) for label, key in LABELS.items()}


# -- generated tokens ------------------------------------------------------------------------
@dataclass
class Generated:
    """The new tokens of one pass, split by modality (codes relative to their first token)."""

    text_ids: list[int] = field(default_factory=list)
    audio_codes: list[int] = field(default_factory=list)
    image_codes: list[int] = field(default_factory=list)
    #: the text tokens decoded without special tokens (filled in by the backbone)
    text: str = ""


def split_generated(ids: list[int], audio_0: int, image_0: int) -> Generated:
    """Audio tokens are ``audio_0 <= id < image_0`` (the audio vocabulary lies just below the
    image vocabulary), image tokens ``id >= image_0``, everything else is text."""
    out = Generated()
    for token in ids:
        token = int(token)
        if audio_0 <= token < image_0:
            out.audio_codes.append(token - audio_0)
        elif token >= image_0:
            out.image_codes.append(token - image_0)
        else:
            out.text_ids.append(token)
    return out


def image_grid(codes: list[int]) -> list[int] | None:
    """The 256 codes a MAGVIT-v2 decode takes: a short answer is padded with its last code, a long
    one cut, codes clamped to the codebook; ``None`` when there are no image tokens at all."""
    if not codes:
        return None
    codes = list(codes) + [codes[-1]] * max(0, IMAGE_CODES - len(codes))
    return [min(max(int(code), 0), IMAGE_CODEBOOK - 1) for code in codes[:IMAGE_CODES]]
