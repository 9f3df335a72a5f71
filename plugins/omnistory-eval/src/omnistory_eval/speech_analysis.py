"""Speech metadata extraction rules of the paper (Appendix E.2), as pure functions.

Predicted metadata (emotion, speed, pitch, gender) is compared with the target labels by exact
match after lowercasing and stripping.  This module holds every rule that does not need a neural
model, so that each one can be tested at its boundaries:

* audio: librosa, mono, resampled to 16 kHz, silence-trimmed at 30 dB (:func:`load_speech`);
* speed: timestamped Whisper word chunks per second over the span of those words; without word
  timestamps, whitespace tokens of the transcript over the energy-based speech duration
  (:func:`speaking_rate`); slow < 2.6 <= normal <= 4.7 < fast (:func:`speed_label`);
* pitch: median F0 from ``librosa.pyin`` (>= 5 finite estimates), else ``librosa.yin`` (>= 5 finite
  positive estimates), else unknown (:func:`median_f0`); thresholds by predicted gender, boundary
  values are normal (:func:`pitch_label`);
* gender: 3.0 s windows with a 1.5 s hop (:func:`gender_windows`), female/male probabilities
  averaged and binarized (:func:`binarize_gender`);
* emotion: each recognizer's labels canonicalized to neutral/happy/sad/angry per source label set
  (:func:`canonical_distribution`), distributions averaged with equal weights
  (:func:`ensemble_emotion`).

Where the paper is silent, the public evaluation harness of the paper's authors was followed (facts
only): pitch/speed default to ``normal`` when no estimate exists; the speech rate divides by the
span from the first word start to the last word end; F0 search range C2-C7; windows that do not fit
completely are not scored; a female/male tie is ``male``; emotion ties go to the first label in
``neutral, happy, sad, angry`` order.

Nothing here imports numpy or librosa at module import time.  The metric that applies these rules
with its neural models is :mod:`omnistory_eval.metrics.speech_meta`
(``metric=speech_meta``); this module's earlier name, ``speech_metadata``, stays importable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

FIELDS: tuple[str, ...] = ("emotion", "speed", "pitch", "gender")
SAMPLE_RATE = 16_000
TRIM_TOP_DB = 30.0
GENDER_WINDOW_S = 3.0
GENDER_HOP_S = 1.5
MIN_F0_ESTIMATES = 5
F0_FMIN_HZ = 65.40639132514966  # librosa.note_to_hz("C2")
F0_FMAX_HZ = 2093.004522404789  # librosa.note_to_hz("C7")
CANONICAL_EMOTIONS: tuple[str, ...] = ("neutral", "happy", "sad", "angry")


# --------------------------------------------------------------------------------------------
# thresholds
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Thresholds:
    """Speed (units/s) and pitch (Hz) thresholds; the field names match the calibration JSON files
    of the public harness so those files load unchanged."""

    speed_slow_normal: float = 2.6
    speed_normal_fast: float = 4.7
    pitch_male_low_normal: float = 110.0
    pitch_male_normal_high: float = 170.0
    pitch_female_low_normal: float = 165.0
    pitch_female_normal_high: float = 255.0
    pitch_unknown_low_normal: float = 145.0
    pitch_unknown_normal_high: float = 220.0

    def __post_init__(self) -> None:
        pairs = [
            ("speed_slow_normal", "speed_normal_fast"),
            ("pitch_male_low_normal", "pitch_male_normal_high"),
            ("pitch_female_low_normal", "pitch_female_normal_high"),
            ("pitch_unknown_low_normal", "pitch_unknown_normal_high"),
        ]
        for low, high in pairs:
            lo, hi = getattr(self, low), getattr(self, high)
            if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
                raise ValueError(f"thresholds: need finite {low} <= {high}, got {lo} and {hi}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<dict>") -> Thresholds:
        """Build from a mapping; missing keys keep the paper's values.  Errors name the source and
        the field."""
        if not isinstance(data, Mapping):
            raise ValueError(
                f"{source}: calibration must be a JSON object, got {type(data).__name__}"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"{source}: unknown calibration field(s) {unknown}; known: {sorted(known)}"
            )
        values: dict[str, float] = {}
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{source}: field {key!r} must be a number, got {value!r}")
            values[key] = float(value)
        try:
            return cls(**values)
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None

    @classmethod
    def from_json(cls, path: str | Path) -> Thresholds:
        """Load a calibration JSON file (a flat object of the fields above)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"{path}: cannot read calibration file: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: invalid JSON: {exc}") from None
        return cls.from_dict(data, source=str(path))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def pitch_bounds(self, gender: str | None) -> tuple[float, float]:
        """(low/normal, normal/high) thresholds for a predicted gender (None = unavailable)."""
        canon = canonical_gender(gender)
        if canon == "male":
            return self.pitch_male_low_normal, self.pitch_male_normal_high
        if canon == "female":
            return self.pitch_female_low_normal, self.pitch_female_normal_high
        return self.pitch_unknown_low_normal, self.pitch_unknown_normal_high


DEFAULT_THRESHOLDS = Thresholds()


# --------------------------------------------------------------------------------------------
# labels
# --------------------------------------------------------------------------------------------


def normalize_label(value: Any) -> str:
    """The comparison form of a label: ``str(value).strip().lower()`` ("" for None)."""
    return "" if value is None else str(value).strip().lower()


_GENDER_ALIASES = {
    "m": "male",
    "male": "male",
    "man": "male",
    "f": "female",
    "female": "female",
    "woman": "female",
}


def canonical_gender(label: str | None) -> str | None:
    """``male`` / ``female`` for common spellings, None for anything else (incl. None)."""
    return _GENDER_ALIASES.get(normalize_label(label)) if label is not None else None


def speed_label(units_per_second: float | None, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> str:
    """slow if rate < 2.6, fast if rate > 4.7, else normal (both boundaries are normal).

    A missing or non-finite rate (no transcript units, no speech) is ``normal``."""
    if units_per_second is None or not math.isfinite(units_per_second):
        return "normal"
    if units_per_second < thresholds.speed_slow_normal:
        return "slow"
    if units_per_second > thresholds.speed_normal_fast:
        return "fast"
    return "normal"


def pitch_label(
    median_f0_hz: float | None,
    gender: str | None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> str:
    """low below the lower threshold, high above the upper one, normal otherwise (boundaries are
    normal).  Thresholds: male 110/170 Hz, female 165/255 Hz, unknown gender 145/220 Hz.  No F0
    estimate gives ``normal``."""
    if median_f0_hz is None or not math.isfinite(median_f0_hz):
        return "normal"
    low, high = thresholds.pitch_bounds(gender)
    if median_f0_hz < low:
        return "low"
    if median_f0_hz > high:
        return "high"
    return "normal"


def binarize_gender(female: float, male: float) -> str:
    """``male`` if the averaged male probability is at least the female one, else ``female``."""
    return "male" if male >= female else "female"


# --------------------------------------------------------------------------------------------
# audio
# --------------------------------------------------------------------------------------------


def load_speech(path: str | Path) -> tuple[Any, Any]:
    """Load a speech file: mono, 16 kHz (librosa).  Returns ``(full, trimmed)`` float32 arrays:
    ``full`` is what the transcription sees, ``trimmed`` (30 dB silence trim) is what emotion,
    gender and prosody see.  Raises ValueError naming the file if it cannot be decoded or is
    empty."""
    import librosa

    try:
        audio, sr = librosa.load(str(path), sr=None, mono=True)
    except Exception as exc:  # librosa raises many types (soundfile, audioread, ...)
        raise ValueError(f"{path}: cannot decode audio: {type(exc).__name__}: {exc}") from None
    if audio.size == 0:
        raise ValueError(f"{path}: audio file has no samples")
    if sr != SAMPLE_RATE:
        audio = librosa.resample(audio, orig_sr=sr, target_sr=SAMPLE_RATE)
    return audio, trim_silence(audio)


def trim_silence(waveform: Any, top_db: float = TRIM_TOP_DB) -> Any:
    """Leading/trailing silence trim; an all-silent signal is returned unchanged."""
    import librosa

    if waveform.size == 0:
        return waveform
    trimmed, _ = librosa.effects.trim(waveform, top_db=top_db)
    return trimmed if trimmed.size > 0 else waveform


def energy_speech_duration(waveform: Any, sample_rate: int, top_db: float = TRIM_TOP_DB) -> float:
    """Seconds of non-silent audio: the summed ``librosa.effects.split`` intervals (30 dB); the
    whole signal when no interval is found; 0.0 for an empty signal."""
    import librosa

    if waveform.size == 0:
        return 0.0
    intervals = librosa.effects.split(waveform, top_db=top_db)
    if len(intervals) == 0:
        return float(len(waveform) / sample_rate)
    total = sum(int(end) - int(start) for start, end in intervals) / sample_rate
    return float(max(total, 1e-6))


# --------------------------------------------------------------------------------------------
# speed
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpeedEstimate:
    """How the speaking rate was measured (kept in the audit detail)."""

    units_per_second: float | None
    method: str | None  # "word_timestamps" | "energy_fallback" | None
    units: int
    duration_s: float


def timestamped_words(chunks: Sequence[Mapping[str, Any]] | None) -> list[tuple[float, float]]:
    """(start, end) of the word chunks that count: non-empty text and finite numeric timestamps
    with end > start."""
    words: list[tuple[float, float]] = []
    for chunk in chunks or ():
        text = str(chunk.get("text", "")).strip()
        stamp = chunk.get("timestamp")
        if not text or not isinstance(stamp, (tuple, list)) or len(stamp) != 2:
            continue
        start, end = stamp
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (start, end)):
            continue
        if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
            continue
        words.append((float(start), float(end)))
    return words


def token_like_count(text: str | None) -> int:
    """Whitespace-separated tokens of a transcript."""
    return len(text.split()) if text else 0


def speaking_rate(
    transcript: str | None,
    chunks: Sequence[Mapping[str, Any]] | None,
    waveform: Any,
    sample_rate: int,
) -> SpeedEstimate:
    """Units per second: timestamped word chunks over (last end - first start); without usable
    word timestamps, :func:`token_like_count` over :func:`energy_speech_duration` of ``waveform``
    (the trimmed 16 kHz signal)."""
    words = timestamped_words(chunks)
    if words:
        span = max(max(e for _, e in words) - min(s for s, _ in words), 1e-6)
        return SpeedEstimate(len(words) / span, "word_timestamps", len(words), span)
    units = token_like_count((transcript or "").strip())
    duration = energy_speech_duration(waveform, sample_rate)
    if units == 0 or duration <= 0.0:
        return SpeedEstimate(None, None, units, duration)
    return SpeedEstimate(units / duration, "energy_fallback", units, duration)


# --------------------------------------------------------------------------------------------
# pitch
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class F0Estimate:
    median_hz: float | None
    method: str | None  # "pyin" | "yin" | None
    estimates: int  # usable frame estimates of the method that decided


def estimate_f0(waveform: Any, sample_rate: int) -> F0Estimate:
    """The pyin -> yin -> None chain (search range C2-C7, >= 5 usable estimates each)."""
    import librosa
    import numpy as np

    wave = np.asarray(waveform, dtype=np.float32).reshape(-1)
    if wave.size == 0:
        return F0Estimate(None, None, 0)
    try:
        f0, _, _ = librosa.pyin(wave, sr=sample_rate, fmin=F0_FMIN_HZ, fmax=F0_FMAX_HZ)
        usable = f0[np.isfinite(f0)]
        if usable.size >= MIN_F0_ESTIMATES:
            return F0Estimate(float(np.median(usable)), "pyin", int(usable.size))
    except Exception:  # pyin rejects some inputs (non-finite, too short); the chain moves on
        pass
    n_yin = 0
    try:
        f0 = np.asarray(librosa.yin(wave, sr=sample_rate, fmin=F0_FMIN_HZ, fmax=F0_FMAX_HZ))
        usable = f0[np.isfinite(f0) & (f0 > 0)]
        n_yin = int(usable.size)
        if usable.size >= MIN_F0_ESTIMATES:
            return F0Estimate(float(np.median(usable)), "yin", n_yin)
    except Exception:
        pass
    return F0Estimate(None, None, n_yin)


def median_f0(waveform: Any, sample_rate: int) -> float | None:
    """Median fundamental frequency in Hz (see :func:`estimate_f0`), or None."""
    return estimate_f0(waveform, sample_rate).median_hz


# --------------------------------------------------------------------------------------------
# gender windows
# --------------------------------------------------------------------------------------------


def gender_windows(
    n_samples: int,
    sample_rate: int = SAMPLE_RATE,
    window_s: float = GENDER_WINDOW_S,
    hop_s: float = GENDER_HOP_S,
) -> list[tuple[int, int]]:
    """(start, end) sample ranges: the whole signal if it fits in one window, else every complete
    window at multiples of the hop (a trailing partial window is not scored)."""
    if n_samples <= 0:
        return []
    win = max(int(window_s * sample_rate), 1)
    hop = max(int(hop_s * sample_rate), 1)
    if n_samples <= win:
        return [(0, n_samples)]
    return [(start, start + win) for start in range(0, n_samples - win + 1, hop)]


# --------------------------------------------------------------------------------------------
# emotion
# --------------------------------------------------------------------------------------------

#: Label set of each emotion recognizer, in output index order.
EMOTION_SOURCE_LABELS: dict[str, tuple[str, ...]] = {
    # label encoder of speechbrain/emotion-recognition-wav2vec2-IEMOCAP
    "speechbrain": ("neu", "ang", "hap", "sad"),
    # config.id2label of superb/hubert-large-superb-er
    "hubert": ("neu", "hap", "ang", "sad"),
    # iic/emotion2vec_plus_large (funasr prints them bilingual, e.g. "生气/angry")
    "emotion2vec": (
        "angry",
        "disgusted",
        "fearful",
        "happy",
        "neutral",
        "other",
        "sad",
        "surprised",
        "unknown",
    ),
}

_EMOTION_ALIASES = {
    "neu": "neutral",
    "neutral": "neutral",
    "hap": "happy",
    "happy": "happy",
    "joy": "happy",
    "sad": "sad",
    "sadness": "sad",
    "ang": "angry",
    "anger": "angry",
    "angry": "angry",
}


def source_label(label: Any) -> str:
    """A recognizer's raw label in comparable form: lowercase, English half of a bilingual
    ``"中文/english"`` label, ``<unk>`` as ``unknown``."""
    text = normalize_label(label).split("/")[-1].strip()
    return "unknown" if text in {"<unk>", "unk"} else text


def canonical_emotion(label: Any) -> str | None:
    """neutral/happy/sad/angry for a recognizer label, None for labels outside those four."""
    return _EMOTION_ALIASES.get(source_label(label))


def as_probabilities(scores: Sequence[float], log_scores: str = "auto") -> list[float]:
    """Scores as non-negative weights. ``log_scores="auto"`` exponentiates a vector whose values are
    all <= 0 (log posteriors, as SpeechBrain's ``classify_batch`` documents); ``"never"`` keeps the
    values and clips negatives to 0 (what the public harness did with SpeechBrain's output)."""
    values = [float(s) for s in scores]
    if any(not math.isfinite(v) and v != -math.inf for v in values):
        raise ValueError(f"emotion scores must be finite, got {values}")
    if log_scores == "auto" and values and all(v <= 0.0 for v in values):
        return [math.exp(v) for v in values]
    if log_scores not in ("auto", "never"):
        raise ValueError(f"log_scores must be 'auto' or 'never', got {log_scores!r}")
    return [max(v, 0.0) for v in values]


def canonical_distribution(
    labels: Sequence[Any],
    scores: Sequence[float],
    source: str,
    log_scores: str = "auto",
) -> dict[str, float]:
    """One recognizer's output as a normalized distribution over neutral/happy/sad/angry.

    Labels outside the four canonical emotions (emotion2vec's disgusted, fearful, other, surprised,
    unknown) are dropped before normalizing; a label not in the source's known label set is an
    error (a wrong checkpoint, not a prediction).  All-zero mass gives the uniform distribution."""
    if len(labels) != len(scores):
        raise ValueError(f"{source}: {len(labels)} labels but {len(scores)} scores")
    known = EMOTION_SOURCE_LABELS.get(source)
    probs = as_probabilities(scores, log_scores)
    mass = dict.fromkeys(CANONICAL_EMOTIONS, 0.0)
    for label, prob in zip(labels, probs, strict=True):
        raw = source_label(label)
        if known is not None and raw not in known:
            raise ValueError(f"{source}: unexpected label {label!r}; known labels: {list(known)}")
        canon = _EMOTION_ALIASES.get(raw)
        if canon is not None:
            mass[canon] += prob
    return normalize_distribution(mass)


def normalize_distribution(mass: Mapping[str, float]) -> dict[str, float]:
    total = sum(max(v, 0.0) for v in mass.values())
    if total <= 0.0:
        return {k: 1.0 / len(mass) for k in mass}
    return {k: max(v, 0.0) / total for k, v in mass.items()}


def ensemble_emotion(distributions: Sequence[Mapping[str, float]]) -> tuple[str, dict[str, float]]:
    """Equal-weight average of canonical distributions and its arg-max label (ties go to the first
    of neutral, happy, sad, angry)."""
    if not distributions:
        raise ValueError("emotion ensemble needs at least one distribution")
    mean = {
        k: sum(float(d.get(k, 0.0)) for d in distributions) / len(distributions)
        for k in CANONICAL_EMOTIONS
    }
    probs = normalize_distribution(mean)
    best = max(CANONICAL_EMOTIONS, key=lambda k: (probs[k], -CANONICAL_EMOTIONS.index(k)))
    return best, probs


# --------------------------------------------------------------------------------------------
# scoring
# --------------------------------------------------------------------------------------------


def field_matches(predicted: Mapping[str, Any], reference: Mapping[str, Any]) -> dict[str, float]:
    """1.0/0.0 per field: exact match after lowercase/strip.  A predicted value of None (the
    classifier failed) is skipped; the caller reports that field as invalid."""
    return {
        f: float(normalize_label(predicted[f]) == normalize_label(reference.get(f)))
        for f in FIELDS
        if predicted.get(f) is not None
    }


def metadata_accuracy(scores: Mapping[str, float | None]) -> float | None:
    """Per-sample accuracy M_i: mean of the four 0/1 matches; None unless all four are valid
    (records without valid extracted metadata are excluded from the valid-only average)."""
    values = [scores.get(f) for f in FIELDS]
    if any(v is None for v in values):
        return None
    return sum(values) / len(FIELDS)  # type: ignore[arg-type]


def exact_match(scores: Mapping[str, float | None]) -> float | None:
    """1.0 if all four fields match, 0.0 otherwise; None unless all four are valid."""
    acc = metadata_accuracy(scores)
    return None if acc is None else float(acc == 1.0)


__all__ = [
    "CANONICAL_EMOTIONS",
    "DEFAULT_THRESHOLDS",
    "EMOTION_SOURCE_LABELS",
    "F0Estimate",
    "FIELDS",
    "SpeedEstimate",
    "Thresholds",
    "as_probabilities",
    "binarize_gender",
    "canonical_distribution",
    "canonical_emotion",
    "canonical_gender",
    "energy_speech_duration",
    "ensemble_emotion",
    "estimate_f0",
    "exact_match",
    "field_matches",
    "gender_windows",
    "load_speech",
    "median_f0",
    "metadata_accuracy",
    "normalize_label",
    "pitch_label",
    "speaking_rate",
    "speed_label",
    "timestamped_words",
    "token_like_count",
    "trim_silence",
]
