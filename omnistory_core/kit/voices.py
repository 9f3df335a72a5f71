"""Deterministic voice choice shared by the TTS experts.

A character must sound the same on every page of a book, in every process and every run, so a
speaker's voice is derived from the speaker name with SHA-256 (Python's ``hash()`` is salted per
process and would change voices between runs).  When the plan carries no usable gender, the gender
is derived from the name as well: half of all names map to each gender, so a system never defaults
every unlabelled character to one gender.

Pure standard library; no TTS backend is imported here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from omnistory_core.contract import EMOTIONS, GENDERS, PITCHES, SPEEDS

T = TypeVar("T")


def speaker_key(speaker: str) -> str:
    """The normalised speaker identity: case and surrounding/inner whitespace do not matter, so
    ``"Little  Bear"`` and ``"little bear "`` get the same voice."""
    return " ".join(str(speaker).split()).casefold()


def stable_choice(key: str, options: Sequence[T]) -> T:
    """Pick one of ``options`` from ``key``, identically in every process (SHA-256 based).

    Uniform over the options for varied keys (64 bits of the digest modulo ``len(options)``; the
    modulo bias is below 1e-17 for any realistic number of options).
    """
    if len(options) == 0:
        raise ValueError(f"stable_choice({key!r}): no options to choose from")
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return options[int.from_bytes(digest[:8], "big") % len(options)]


def resolve_gender(gender: str | None, speaker: str) -> str:
    """``"female"``/``"male"`` (any case, surrounding whitespace ignored) are kept; anything else
    (missing, empty, unknown) becomes a deterministic, gender-balanced choice from the speaker
    name."""
    label = (gender or "").strip().casefold()
    if label in GENDERS:
        return label
    return stable_choice("gender:" + speaker_key(speaker), GENDERS)


def voice_for(speaker: str, gender: str | None, voices_by_gender: Mapping[str, Sequence[T]]) -> T:
    """The voice of ``speaker``: the resolved gender's list, indexed by a stable hash of the name.

    The name's hash is salted differently from the one in :func:`resolve_gender`, so the variant
    chosen within a gender is independent of how the gender was obtained.
    """
    resolved = resolve_gender(gender, speaker)
    if resolved not in voices_by_gender:
        raise KeyError(
            f"voice_for: no voices for gender {resolved!r} (have {sorted(voices_by_gender)})"
        )
    return stable_choice("voice:" + speaker_key(speaker), voices_by_gender[resolved])


__all__ = [
    "VoiceLabels",
    "check_label_table",
    "resolve_gender",
    "speaker_key",
    "stable_choice",
    "voice_for",
    "voice_labels",
]


@dataclass(frozen=True)
class VoiceLabels:
    """One utterance's validated voice labels; ``gender`` is always resolved."""

    speaker: str
    gender: str
    emotion: str
    speed: str
    pitch: str


def _label(item: Mapping[str, Any], field: str, allowed: tuple[str, ...], default: str) -> str:
    raw = item.get(field)
    label = str(raw if raw is not None else "").strip().casefold() or default
    if label not in allowed:
        raise ValueError(f"{field} {raw!r} is not one of {list(allowed)}")
    return label


def voice_labels(item: Mapping[str, Any]) -> VoiceLabels:
    """Validate an item's labels (any case, surrounding spaces ignored).

    A missing or empty emotion/speed/pitch means ``neutral``/``normal``; a missing or unknown
    gender is resolved from the speaker name (gender-balanced).  A label outside the contract's
    sets raises ``ValueError`` naming the field.
    """
    speaker = str(item.get("speaker") or "")
    return VoiceLabels(
        speaker=speaker,
        gender=resolve_gender(item.get("gender"), speaker),
        emotion=_label(item, "emotion", EMOTIONS, "neutral"),
        speed=_label(item, "speed", SPEEDS, "normal"),
        pitch=_label(item, "pitch", PITCHES, "normal"),
    )


def check_label_table(
    name: str,
    table: Any,
    labels: tuple[str, ...],
    *,
    sequence: bool = False,
    forbidden_chars: str = "",
) -> None:
    """Check a label -> phrase table of a TTS description vocabulary (one entry per label, each a
    non-empty string, or a non-empty list of them with ``sequence``); errors name the entry."""
    if not isinstance(table, Mapping):
        raise ValueError(f"{name} must be a mapping of {list(labels)}, got {type(table).__name__}")
    missing = [label for label in labels if label not in table]
    extra = sorted(str(k) for k in table if k not in labels)
    if missing or extra:
        raise ValueError(
            f"{name} must have exactly the keys {list(labels)} (missing {missing}, unknown {extra})"
        )
    for label in labels:
        value = table[label]
        if sequence:
            values = [] if isinstance(value, str | Mapping) else list(value)
        else:
            values = [value]
        if not values or not all(isinstance(v, str) and v.strip() for v in values):
            what = "a non-empty list of non-empty strings" if sequence else "a non-empty string"
            raise ValueError(f"{name}.{label} must be {what}, got {value!r}")
        if forbidden_chars and any(c in v for v in values for c in forbidden_chars):
            raise ValueError(
                f"{name}.{label} must not contain any of {forbidden_chars!r}, got {value!r}"
            )
