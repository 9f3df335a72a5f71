"""VoxCPM2 voice-design prompts: pure functions, no torch, importable in any environment.

VoxCPM2 designs a voice from a natural-language description written in parentheses in front of
the text to speak (its CLI builds ``"(" + description + ")" + text``).  This module words that
description from a plan's speech labels:

* **gender** is stated explicitly ("female voice"); a missing or unknown gender is resolved from
  the speaker name, half of all names to each gender, never to one default gender;
* **character**: a timbre phrase chosen from the speaker name by a stable SHA-256 hash
  (``omnistory_core.kit.voices``), so a character's description, and with the fixed seed its
  voice, stay the same on every page;
* **emotion**, **speed** and **pitch** as tone, pace and pitch phrases (VoxCPM2's voice design
  covers emotion, unlike Parler-TTS v1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from omnistory_core.api import EMOTIONS, GENDERS, PITCHES, SPEEDS
from omnistory_core.kit.voices import VoiceLabels, check_label_table, voice_for, voice_labels

GENDER_PHRASES: dict[str, str] = {"female": "female voice", "male": "male voice"}

# Per-speaker timbre words; they avoid pitch and age words, which the pitch label and the
# unknown character age must decide.
CHARACTERS_BY_GENDER: dict[str, tuple[str, ...]] = {
    "female": ("warm and smooth timbre", "bright and crisp timbre", "soft and gentle timbre"),
    "male": ("warm and smooth timbre", "rich and rounded timbre", "crisp and clear timbre"),
}

TONE_PHRASES: dict[str, str] = {
    "neutral": "even, neutral tone",
    "happy": "happy and lively tone",
    "sad": "sad and downcast tone",
    "angry": "angry and harsh tone",
}
PACE_PHRASES: dict[str, str] = {"slow": "slow pace", "normal": "moderate pace", "fast": "fast pace"}
PITCH_PHRASES: dict[str, str] = {"low": "low pitch", "normal": "medium pitch", "high": "high pitch"}
RECORDING = "clear recording"


@dataclass(frozen=True)
class Vocabulary:
    """Everything that words a description; each mapping covers every label of its field."""

    gender: Mapping[str, str]
    characters: Mapping[str, Sequence[str]]
    tone: Mapping[str, str]
    pace: Mapping[str, str]
    pitch: Mapping[str, str]
    recording: str

    def __post_init__(self) -> None:
        check_label_table("gender_phrases", self.gender, GENDERS, forbidden_chars="()")
        check_label_table(
            "characters", self.characters, GENDERS, sequence=True, forbidden_chars="()"
        )
        check_label_table("tone_phrases", self.tone, EMOTIONS, forbidden_chars="()")
        check_label_table("pace_phrases", self.pace, SPEEDS, forbidden_chars="()")
        check_label_table("pitch_phrases", self.pitch, PITCHES, forbidden_chars="()")
        if not isinstance(self.recording, str) or any(c in self.recording for c in "()"):
            raise ValueError(
                f"recording must be a string without parentheses, got {self.recording!r}"
            )
        object.__setattr__(self, "characters", {g: tuple(self.characters[g]) for g in GENDERS})


DEFAULT_VOCABULARY = Vocabulary(
    gender=GENDER_PHRASES,
    characters=CHARACTERS_BY_GENDER,
    tone=TONE_PHRASES,
    pace=PACE_PHRASES,
    pitch=PITCH_PHRASES,
    recording=RECORDING,
)


def speaker_character(labels: VoiceLabels, vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> str:
    """The timbre phrase of ``labels.speaker`` (stable per normalised name and gender)."""
    return voice_for(labels.speaker, labels.gender, vocabulary.characters)


def voice_description(labels: VoiceLabels, vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> str:
    """The voice description, e.g. ``"male voice, rich and rounded timbre, angry and harsh tone,
    fast pace, low pitch, clear recording"``."""
    parts = [
        vocabulary.gender[labels.gender],
        speaker_character(labels, vocabulary),
        vocabulary.tone[labels.emotion],
        vocabulary.pace[labels.speed],
        vocabulary.pitch[labels.pitch],
        vocabulary.recording.strip(),
    ]
    return ", ".join(p.strip() for p in parts if p.strip())


def controlled_text(
    text: str, labels: VoiceLabels, vocabulary: Vocabulary = DEFAULT_VOCABULARY
) -> str:
    """VoxCPM2's input: ``"(<voice description>)<text>"``."""
    return f"({voice_description(labels, vocabulary)}){text}"


__all__ = [
    "CHARACTERS_BY_GENDER",
    "DEFAULT_VOCABULARY",
    "GENDER_PHRASES",
    "PACE_PHRASES",
    "PITCH_PHRASES",
    "RECORDING",
    "TONE_PHRASES",
    "VoiceLabels",
    "Vocabulary",
    "controlled_text",
    "speaker_character",
    "voice_description",
    "voice_labels",
]
