"""How the plan's voice labels become Piper settings: pure functions (numpy only, no piper).

Piper voices have no pitch or emotion control and most have one speaker, so the labels are
rendered with what there is:

* **speed**: Piper's ``length_scale`` (phoneme durations; < 1 is faster), one value per label;
* **pitch**: a shift in semitones after synthesis.  The voice is synthesized with its durations
  stretched by the pitch ratio ``r = 2 ** (semitones / 12)`` and then resampled by ``r``
  (:func:`shift_pitch`), which raises (or lowers) every frequency by ``r`` and brings the duration
  back to the one the speed label asked for, with no time-stretching algorithm (and no sox);
  formants move with the pitch, so large shifts sound smaller/larger rather than like another
  speaker;
* **gender**: the voice's own gender needs nothing; the other gender, which no packaged voice
  offers, is one of three honest choices (:data:`OTHER_GENDER_MODES`): ``shift`` the voice's pitch
  by ``other_gender_semitones`` (a higher or lower version of the same voice, not a voice of the
  other gender), speak it ``as_is``, or ``fail`` the item (``voice_unavailable``);
* **emotion**: not modelled by Piper.  As eSpeak's expert does, an emotion is a global prosody
  change (a pitch offset, a rate factor, a volume factor; :data:`EMOTION_PROSODY`); listeners hear
  livelier or flatter speech, not acted emotion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omnistory_core.api import EMOTIONS, GENDERS, PITCHES, SPEEDS
from omnistory_core.kit.voices import VoiceLabels

#: what a request for the gender the voice does not have becomes
OTHER_GENDER_MODES = ("shift", "as_is", "fail")

#: ``length_scale`` per speed label.  The benchmark's speed rule counts words per second (slow
#: < 2.6 <= normal <= 4.7 < fast); joe reads a 11-word line at 3.55 words/s (audio length, edges
#: included) at 1.0, 2.75 at 1.3 and 4.2 at 0.75 (measured, README), so the outer labels go further
LENGTH_SCALES: dict[str, float] = {"slow": 1.45, "normal": 1.0, "fast": 0.65}

#: semitones per pitch label, for a voice of its own gender.  Chosen for the joe voice, whose
#: median F0 is about 87 Hz (measured, README), against the benchmark's pitch rule for male speech
#: (low < 110 Hz <= normal <= 170 Hz < high): -2 -> ~77 Hz, +6 -> ~122 Hz, +13 -> ~183 Hz.  The
#: high shift is large (formants move with it: a brighter, smaller-sounding voice).
PITCH_SEMITONES: dict[str, float] = {"low": -2.0, "normal": 6.0, "high": 13.0}

#: semitones added for the gender the voice does not have (``other_gender=shift``): with joe's
#: ~87 Hz and the pitch table, low/normal/high land near 115/183/275 Hz, in the benchmark's female
#: bins (low < 165 Hz <= normal <= 255 Hz < high)
OTHER_GENDER_SEMITONES = 7.0

#: per emotion: semitones added to the pitch, factor on the speaking rate, factor on the volume
EMOTION_PROSODY: dict[str, dict[str, float]] = {
    "neutral": {"semitones": 0.0, "rate": 1.0, "volume": 1.0},
    "happy": {"semitones": 1.0, "rate": 1.08, "volume": 1.1},
    "sad": {"semitones": -1.0, "rate": 0.88, "volume": 0.75},
    "angry": {"semitones": 0.5, "rate": 1.1, "volume": 1.25},
}

_PROSODY_KEYS = ("semitones", "rate", "volume")


@dataclass(frozen=True)
class Delivery:
    """The settings of one utterance: Piper's ``length_scale`` (the speed label and the emotion's
    rate, before the pitch compensation), the pitch shift in semitones and the output volume."""

    length_scale: float
    semitones: float
    volume: float
    #: the label's gender differs from the voice's (and ``other_gender`` is ``shift``/``as_is``)
    other_gender: bool = False

    @property
    def ratio(self) -> float:
        """The frequency ratio of the pitch shift."""
        return float(2.0 ** (self.semitones / 12.0))


def check_number_table(name: str, table: Any, labels: tuple[str, ...], *, positive: bool) -> None:
    """A label -> number table with exactly ``labels`` as keys (ValueError naming the entry)."""
    if not isinstance(table, Mapping) or set(table) != set(labels):
        keys = sorted(table) if isinstance(table, Mapping) else type(table).__name__
        raise ValueError(f"{name} must have exactly the keys {list(labels)}, got {keys}")
    for label in labels:
        value = table[label]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name}.{label} must be a number, got {value!r}")
        if positive and not value > 0:
            raise ValueError(f"{name}.{label} must be > 0, got {value!r}")


def check_emotion_prosody(table: Any) -> None:
    """``emotion_prosody``: every emotion, each with a number ``semitones`` and positive
    ``rate`` and ``volume``."""
    if not isinstance(table, Mapping) or set(table) != set(EMOTIONS):
        keys = sorted(table) if isinstance(table, Mapping) else type(table).__name__
        raise ValueError(f"emotion_prosody must have exactly the keys {list(EMOTIONS)}, got {keys}")
    for emotion in EMOTIONS:
        entry = table[emotion]
        if not isinstance(entry, Mapping) or set(entry) != set(_PROSODY_KEYS):
            raise ValueError(
                f"emotion_prosody.{emotion} must have exactly the keys {list(_PROSODY_KEYS)},"
                f" got {entry!r}"
            )
        check_number_table(
            f"emotion_prosody.{emotion}",
            {"semitones": entry["semitones"]},
            ("semitones",),
            positive=False,
        )
        check_number_table(
            f"emotion_prosody.{emotion}",
            {k: entry[k] for k in ("rate", "volume")},
            ("rate", "volume"),
            positive=True,
        )


def delivery(
    labels: VoiceLabels,
    *,
    voice_gender: str,
    length_scales: Mapping[str, float] = LENGTH_SCALES,
    pitch_semitones: Mapping[str, float] = PITCH_SEMITONES,
    emotion_prosody: Mapping[str, Mapping[str, float]] = EMOTION_PROSODY,
    other_gender_semitones: float = 0.0,
    other_gender: str = "shift",
) -> Delivery | None:
    """The settings for ``labels`` spoken by a voice of ``voice_gender``; None when the labels ask
    for the other gender and ``other_gender`` is ``fail``."""
    if voice_gender not in GENDERS:
        raise ValueError(f"voice_gender must be one of {list(GENDERS)}, got {voice_gender!r}")
    if other_gender not in OTHER_GENDER_MODES:
        raise ValueError(f"other_gender must be one of {list(OTHER_GENDER_MODES)}")
    assert labels.speed in SPEEDS and labels.pitch in PITCHES  # voice_labels checked them
    prosody = emotion_prosody[labels.emotion]
    semitones = float(pitch_semitones[labels.pitch]) + float(prosody["semitones"])
    mismatch = labels.gender != voice_gender
    if mismatch:
        if other_gender == "fail":
            return None
        if other_gender == "shift":
            semitones += float(other_gender_semitones)
    return Delivery(
        length_scale=float(length_scales[labels.speed]) / float(prosody["rate"]),
        semitones=semitones,
        volume=float(prosody["volume"]),
        other_gender=mismatch,
    )


def shift_pitch(samples: Any, ratio: float) -> Any:
    """Resample ``samples`` (float32 mono) by ``ratio``: every frequency times ``ratio``, the
    duration divided by it (the caller synthesized it ``ratio`` times longer).

    Linear interpolation: exact for ``ratio == 1`` (the input is returned), cheap and
    deterministic; raising the pitch folds the content above ``rate / (2 * ratio)`` (about 8 kHz
    for a 22.05 kHz voice shifted up 4 semitones), where speech has little energy.
    """
    import numpy as np

    samples = np.asarray(samples, dtype=np.float32)
    if ratio == 1.0 or samples.size < 2:
        return samples
    length = max(1, int(round(samples.size / ratio)))
    positions = np.arange(length, dtype=np.float64) * (samples.size - 1) / max(1, length - 1)
    return np.interp(positions, np.arange(samples.size), samples).astype(np.float32)


__all__ = [
    "Delivery",
    "EMOTION_PROSODY",
    "LENGTH_SCALES",
    "OTHER_GENDER_MODES",
    "OTHER_GENDER_SEMITONES",
    "PITCH_SEMITONES",
    "check_emotion_prosody",
    "check_number_table",
    "delivery",
    "shift_pitch",
]
