"""Parler-TTS voice descriptions: pure functions, no torch, importable in any environment.

Parler-TTS is steered only by a free-text *description* that its T5 encoder reads; the words it
reacts to are those of its training annotations (named speakers, speaking rate, pitch, expressivity,
recording quality).  This module turns a plan's speech labels into such a description:

* **voice**: a named Parler speaker.  The pools are the ones of the official Omni-StoryBench code
  (male Jon, Gary, Mike; female Lea, Jenna, Laura); the gender label picks the pool and a stable
  SHA-256 hash of the normalised speaker name picks the voice in it
  (``omnistory_core.kit.voices``), so a character sounds the same on every page and in every
  process.  A missing or unknown gender is
  resolved from the name, half of all names to each gender, never to one default gender.
  ``voice_hash=official`` instead applies the official runner's rule (:func:`official_voice`).
* **speed** and **pitch**: phrases from the training vocabulary's bins.
* **emotion**: not a trained attribute of Parler-TTS v1 (see :data:`EMOTION_DELIVERY`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omnistory_core.api import EMOTIONS, GENDERS, PITCHES, SPEEDS
from omnistory_core.kit.voices import VoiceLabels, check_label_table, voice_for, voice_labels

# The named voices the official Omni-StoryBench code draws from (3 per gender).
VOICES_BY_GENDER: dict[str, tuple[str, ...]] = {
    "male": ("Jon", "Gary", "Mike"),
    "female": ("Lea", "Jenna", "Laura"),
}

# The 34 speaker names Parler-TTS v1 was trained with (its model card's list); a voice outside
# this list is still accepted (fine-tunes have other names) but gives no consistent speaker.
KNOWN_VOICES: tuple[str, ...] = (
    "Laura",
    "Gary",
    "Jon",
    "Lea",
    "Karen",
    "Rick",
    "Brenda",
    "David",
    "Eileen",
    "Jordan",
    "Mike",
    "Yann",
    "Joy",
    "James",
    "Eric",
    "Lauren",
    "Rose",
    "Will",
    "Jason",
    "Aaron",
    "Naomie",
    "Alisa",
    "Patrick",
    "Jerry",
    "Tina",
    "Jenna",
    "Bill",
    "Tom",
    "Carol",
    "Barbara",
    "Rebecca",
    "Anna",
    "Bruce",
    "Emily",
)

# Speaking-rate bins of the training annotations ("quite slowly" ... "quite fast"): the outer
# bins are chosen over "slightly" so that the speech-rate classifier can tell them apart.
SPEED_PHRASES: dict[str, str] = {
    "slow": "quite slowly",
    "normal": "at a moderate speed",
    "fast": "quite fast",
}

# Pitch bins; Parler's pitch annotation is relative to the speaker's gender, as is the benchmark's
# pitch classifier (gender-dependent F0 thresholds).
PITCH_PHRASES: dict[str, str] = {
    "low": "a low pitch",
    "normal": "a moderate pitch",
    "high": "a high pitch",
}

# How emotion is rendered.  Parler-TTS v1 was not trained on emotion labels (only the
# mini-expresso fine-tune was), so an emotion is carried two ways:
#   1. the one trained attribute that correlates with it, expressivity (the "monotone ...
#      expressive and animated" bins): happy/angry -> very expressive and animated, sad -> quite
#      monotone, neutral -> slightly expressive (the model card's everyday setting);
#   2. an untrained tone phrase ("sounds angry and forceful") that the T5 encoder understands as
#      language; whether the decoder follows it is not guaranteed and is not verified here.
# Emotion deliberately leaves speed and pitch alone: they are separate labels, scored separately.
EMOTION_DELIVERY: dict[str, str] = {
    "neutral": "slightly expressive",
    "happy": "very expressive and animated",
    "angry": "very expressive and animated",
    "sad": "quite monotone",
}
EMOTION_TONE: dict[str, str] = {
    "neutral": "calm and even",
    "happy": "happy and cheerful",
    "angry": "angry and forceful",
    "sad": "sad and subdued",
}

# The model card's advice: asking for very clear audio gives the cleanest output.
RECORDING = "The recording is very clear audio with almost no background noise."


@dataclass(frozen=True)
class Vocabulary:
    """Everything that words a description; each mapping covers every label of its field."""

    voices: Mapping[str, Sequence[str]]
    speed: Mapping[str, str]
    pitch: Mapping[str, str]
    delivery: Mapping[str, str]
    tone: Mapping[str, str]
    recording: str

    def __post_init__(self) -> None:
        check_label_table("voices", self.voices, GENDERS, sequence=True)
        check_label_table("speed_phrases", self.speed, SPEEDS)
        check_label_table("pitch_phrases", self.pitch, PITCHES)
        check_label_table("emotion_delivery", self.delivery, EMOTIONS)
        check_label_table("emotion_tone", self.tone, EMOTIONS)
        if not isinstance(self.recording, str):
            raise ValueError(f"recording must be a string, got {type(self.recording).__name__}")
        # Lists from a config become tuples, so equal vocabularies compare equal.
        object.__setattr__(self, "voices", {g: tuple(self.voices[g]) for g in GENDERS})


DEFAULT_VOCABULARY = Vocabulary(
    voices=VOICES_BY_GENDER,
    speed=SPEED_PHRASES,
    pitch=PITCH_PHRASES,
    delivery=EMOTION_DELIVERY,
    tone=EMOTION_TONE,
    recording=RECORDING,
)


def parler_voice(labels: VoiceLabels, vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> str:
    """The named Parler voice of ``labels.speaker`` (stable per normalised name and gender)."""
    pools = {g: tuple(vocabulary.voices[g]) for g in GENDERS}
    return voice_for(labels.speaker, labels.gender, pools)


#: how a speaker's voice is chosen (the ``voice_hash`` parameter)
VOICE_HASHES = ("ours", "official")


def official_voice(speaker: Any, gender: Any, vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> str:
    """The voice the official Omni-StoryBench runner gives a speaker.

    Its rule: the pool is the male one for the gender label ``"male"`` and the female one for
    anything else (a missing gender included); the index is the whole SHA-256 digest of the speaker
    name as given (``"default"`` when the name is missing or empty), read as an integer, modulo the
    pool size.  Unlike :func:`parler_voice`, the name is not normalised, so ``"Mina"`` and
    ``"mina "`` may get different voices.  The gender label is compared after trimming and case
    folding, the way every plan label is read.
    """
    label = str(gender if gender is not None else "").strip().casefold()
    pool = tuple(vocabulary.voices["male" if label == "male" else "female"])
    name = str(speaker) if speaker else "default"
    number = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest(), "big")
    return pool[number % len(pool)]


def parler_description(
    labels: VoiceLabels, vocabulary: Vocabulary = DEFAULT_VOCABULARY, *, voice: str | None = None
) -> str:
    """The description for one utterance, e.g. ``"Jon speaks quite fast with a low pitch, in a
    very expressive and animated voice that sounds angry and forceful. The recording is very clear
    audio with almost no background noise."``  ``voice`` replaces the voice chosen by
    :func:`parler_voice` (for :func:`official_voice`)."""
    if voice is None:
        voice = parler_voice(labels, vocabulary)
    sentence = (
        f"{voice} speaks {vocabulary.speed[labels.speed]}"
        f" with {vocabulary.pitch[labels.pitch]}, in a {vocabulary.delivery[labels.emotion]} voice"
        f" that sounds {vocabulary.tone[labels.emotion]}."
    )
    recording = vocabulary.recording.strip()
    return f"{sentence} {recording}" if recording else sentence


__all__ = [
    "DEFAULT_VOCABULARY",
    "EMOTION_DELIVERY",
    "EMOTION_TONE",
    "KNOWN_VOICES",
    "PITCH_PHRASES",
    "RECORDING",
    "SPEED_PHRASES",
    "VOICES_BY_GENDER",
    "VOICE_HASHES",
    "VoiceLabels",
    "Vocabulary",
    "official_voice",
    "parler_description",
    "parler_voice",
    "voice_labels",
]
