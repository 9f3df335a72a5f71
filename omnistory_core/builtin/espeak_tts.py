"""``tts/espeak``: the built-in offline TTS expert (eSpeak NG via the ``espeakng-loader`` wheel).

The wheel ships ``libespeak-ng.so`` and its voice data, so this expert needs no hub download and no
system package.  The library is driven through ``ctypes`` in synchronous mode: a synth callback
collects the 16-bit samples of one utterance.

Determinism.  eSpeak NG keeps synthesis state in C globals that survive ``espeak_Terminate`` (the
pitch-flutter phase, the automatic gain, cycle counters, a noise generator), so the same request
gives slightly different samples depending on what was spoken before it, and a resumed run would
not reproduce an uninterrupted one.  Each utterance is therefore synthesised by a *fresh* library
instance: a private copy of the shared object is ``dlopen``-ed, used once and ``dlclose``-d (the
copy also keeps us apart from any other package in the process that loaded the original file), with
the noise generator seeded.  ``load()`` checks that this really yields identical samples.  The cost
is a few milliseconds per utterance and roughly 2 KB of native memory that eSpeak NG never frees.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import sys
import tempfile
import threading
import unicodedata
from dataclasses import dataclass
from typing import Any

from omnistory_core.components import Audio, ComponentError, TTSExpert
from omnistory_core.contract import EMOTIONS, PITCHES, SPEEDS, Failure
from omnistory_core.kit.voices import resolve_gender, voice_for
from omnistory_core.params import Param

# eSpeak NG's female and male voice variants (files under espeak-ng-data/voices/!v).  f5 is left
# out (heavy breath noise, reduced voicing) and m8 (a special tone-shaped voice).
VARIANTS_BY_GENDER: dict[str, tuple[str, ...]] = {
    "female": ("f1", "f2", "f3", "f4"),
    "male": ("m1", "m2", "m3", "m4", "m5", "m6", "m7"),
}


@dataclass(frozen=True)
class Prosody:
    """How one emotion label is rendered with eSpeak's four global voice controls."""

    pitch: int  # added to the base pitch, in eSpeak pitch steps (0-100; +50 steps = one octave)
    range: int  # eSpeak pitch range (0-100): 50 is the variant's own intonation, 0 is monotone
    rate: float  # factor on the words-per-minute of the speed label
    volume: float  # factor on the base amplitude


# eSpeak NG has no emotion model: an emotion is a global prosody setting for the whole utterance,
# following the usual acoustic correlates (sad: lower, slower, quieter, flat; happy: higher,
# faster, livelier; angry: louder, faster, wide swings; neutral: the voice as it is).
EMOTION_PROSODY: dict[str, Prosody] = {
    "neutral": Prosody(pitch=0, range=50, rate=1.0, volume=1.0),
    "happy": Prosody(pitch=6, range=80, rate=1.1, volume=1.1),
    "sad": Prosody(pitch=-6, range=20, rate=0.85, volume=0.8),
    "angry": Prosody(pitch=2, range=90, rate=1.12, volume=1.4),
}

# espeak_AUDIO_OUTPUT, espeak_PARAMETER, position type and synth flags from speak_lib.h.
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000  # without it a bad data path makes the library call exit()
_PARAM_RATE, _PARAM_VOLUME, _PARAM_PITCH, _PARAM_RANGE = 1, 2, 3, 4
_POS_CHARACTER = 1
_CHARS_UTF8 = 1  # plain UTF-8 text: no SSML, no [[phoneme]] input
_LIMITS = {  # eSpeak's accepted ranges, values are clamped into them
    _PARAM_RATE: (80, 450),
    _PARAM_VOLUME: (0, 200),
    _PARAM_PITCH: (0, 100),
    _PARAM_RANGE: (0, 100),
}

_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)

# The library copy is shared by every instance in the process; one utterance at a time.
_LOCK = threading.Lock()
_PRIVATE: dict[str, Any] = {}


def _bundled_paths() -> tuple[str, str]:
    try:
        import espeakng_loader
    except ImportError as exc:  # pragma: no cover - the core depends on it
        raise ComponentError(
            "tts/espeak needs the 'espeakng-loader' package (pip install espeakng-loader)"
        ) from exc
    return espeakng_loader.get_library_path(), espeakng_loader.get_data_path()


def _private_library() -> tuple[str, str]:
    """(path of this process's private copy of libespeak-ng, data path); made once per process."""
    with _LOCK:
        if _PRIVATE.get("pid") != os.getpid():
            library, data = _bundled_paths()
            folder = tempfile.mkdtemp(prefix="omnistory-espeak-")
            copy = os.path.join(folder, os.path.basename(library))
            shutil.copyfile(library, copy)
            _PRIVATE.update(pid=os.getpid(), folder=folder, library=copy, data=data)
            atexit.register(_remove_private, os.getpid(), folder)
        return _PRIVATE["library"], _PRIVATE["data"]


def _remove_private(owner_pid: int, folder: str) -> None:
    if os.getpid() == owner_pid:  # a forked child must not delete its parent's copy
        shutil.rmtree(folder, ignore_errors=True)


def _unload(lib: ctypes.CDLL) -> None:
    import _ctypes

    # dlclose on POSIX, FreeLibrary on Windows
    close = _ctypes.FreeLibrary if sys.platform == "win32" else _ctypes.dlclose
    close(lib._handle)


def _declare(lib: ctypes.CDLL) -> None:
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_Initialize.restype = ctypes.c_int
    lib.espeak_SetSynthCallback.argtypes = [_SynthCallback]
    lib.espeak_SetSynthCallback.restype = None
    lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_Synth.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]


def _check(status: int, what: str) -> None:
    if status != 0:
        raise ComponentError(f"tts/espeak: {what} failed (eSpeak NG status {status})")


def synthesize(text: str, voice: str, settings: dict[int, int], seed: int = 0) -> tuple[Any, int]:
    """Speak ``text`` with eSpeak voice ``voice`` (``"en-us+f2"``) and ``settings``
    (``{espeak_PARAMETER: value}``) in a fresh library instance; ``seed`` seeds eSpeak's noise
    generator (breath noise of some variants).

    Returns ``(int16 numpy array, sample rate)``.  Thread-safe; deterministic.
    """
    import numpy as np

    library, data = _private_library()
    chunks: list[Any] = []

    @_SynthCallback
    def on_audio(wav, count, _events):
        if count > 0 and wav:
            chunks.append(np.ctypeslib.as_array(wav, shape=(count,)).copy())
        return 0  # 0 = continue

    encoded = text.encode("utf-8") + b"\0"
    with _LOCK:
        lib = ctypes.CDLL(library)
        try:
            _declare(lib)
            rate = lib.espeak_Initialize(
                _AUDIO_OUTPUT_SYNCHRONOUS, 0, data.encode(), _INITIALIZE_DONT_EXIT
            )
            if rate <= 0:
                raise ComponentError(f"tts/espeak: espeak_Initialize failed with data path {data}")
            try:
                lib.espeak_SetSynthCallback(on_audio)
                lib.espeak_ng_SetRandSeed(int(seed) & 0x7FFFFFFF)
                _check(lib.espeak_SetVoiceByName(voice.encode()), f"selecting voice {voice!r}")
                for param, value in sorted(settings.items()):
                    low, high = _LIMITS[param]
                    _check(
                        lib.espeak_SetParameter(param, min(max(int(value), low), high), 0),
                        f"setting parameter {param}",
                    )
                _check(
                    lib.espeak_Synth(
                        encoded, len(encoded), 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
                    ),
                    "espeak_Synth",
                )
                _check(lib.espeak_Synchronize(), "espeak_Synchronize")
            finally:
                lib.espeak_Terminate()
        finally:
            _unload(lib)  # the next utterance starts from the library's initial state
    samples = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)
    return samples, int(rate)


def available_variants() -> set[str]:
    """Names of the voice variants in the bundled eSpeak NG data."""
    _, data = _bundled_paths()
    return set(os.listdir(os.path.join(data, "voices", "!v")))


def clean_text(text: str) -> str:
    """The utterance as given, with control characters (never speakable; NUL would cut the C
    string) turned into spaces and surrounding whitespace removed."""
    return "".join(" " if unicodedata.category(c) == "Cc" else c for c in text).strip()


def _label(value: Any, field: str, allowed: tuple[str, ...], default: str) -> str:
    label = str(value or "").strip().casefold() or default
    if label not in allowed:
        raise ValueError(f"{field} {value!r} is not one of {list(allowed)}")
    return label


class EspeakTTS(TTSExpert):
    """Offline TTS with eSpeak NG (formant synthesis, CPU only, no downloads).

    Voice: the gender label (or, when it is missing or unknown, a gender-balanced choice from the
    speaker name) picks the variant family, and a stable hash of the speaker name picks one variant
    in it (``f1``-``f4`` female, ``m1``-``m7`` male), so a character keeps its voice on every page.

    Speed: ``slow``/``normal``/``fast`` -> ``wpm_slow``/``wpm_normal``/``wpm_fast`` words per
    minute.
    Pitch: eSpeak's base pitch (0-100, 50 steps per octave) is ``female_pitch`` or ``male_pitch``
    for ``normal``, minus/plus ``pitch_step`` for ``low``/``high``; it scales the variant's own
    register, so a high male voice stays male.

    Emotion: eSpeak NG has no emotion model.  Each emotion is rendered as a global prosody change of
    the whole utterance (table ``EMOTION_PROSODY``): pitch offset, pitch range, rate factor and
    volume factor.  ``neutral`` = base; ``happy`` = +6 pitch steps, wide range (80), 1.1x rate,
    1.1x volume; ``sad`` = -6 steps, narrow range (20), 0.85x rate, 0.8x volume; ``angry`` = +2
    steps, very wide range (90), 1.12x rate, 1.4x volume.  Listeners hear livelier/flatter,
    faster/slower, louder/softer speech, not acted emotion.

    A missing (empty) speed, pitch or emotion means ``normal``/``neutral``; a label outside the
    contract is a ``plan_invalid_label`` failure.  An empty utterance, or text that produces no
    sound (punctuation only), is an ``empty_output`` failure.  Output: float32 mono at eSpeak's
    native rate (22050 Hz), identical for identical inputs in any process.
    """

    name = "espeak"
    version = "1"
    reads = ("utterance", "speaker", "emotion", "speed", "pitch", "gender")
    description = "eSpeak NG formant TTS (offline, CPU); labels mapped to voice parameters"

    # Every parameter changes the audio (cache key); eSpeak clamps rate to 80-450 wpm.
    parameters = (
        Param("language", str, "en-us", "eSpeak NG voice the variants apply to (en-gb-x-rp, fr)"),
        Param("wpm_slow", float, 130, "words per minute for speed=slow", gt=0),
        Param("wpm_normal", float, 170, "words per minute for speed=normal", gt=0),
        Param("wpm_fast", float, 220, "words per minute for speed=fast", gt=0),
        Param("female_pitch", int, 50, "base pitch of female voices (50/octave)", ge=0, le=100),
        Param("male_pitch", int, 50, "base pitch of male voices", ge=0, le=100),
        Param("pitch_step", int, 15, "pitch=low/high shift in steps (15 ~ 3.6 semitones)", ge=0),
        Param("volume", float, 100, "base amplitude (0-200); emotions scale it", ge=0, le=200),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._loaded = False

    def output_params(self) -> dict[str, Any]:
        # A new eSpeak NG build changes the samples, so its wheel version is part of the key.
        from importlib.metadata import PackageNotFoundError, version

        params = super().output_params()
        try:
            params["espeakng_loader"] = version("espeakng-loader")
        except PackageNotFoundError:  # pragma: no cover - the core depends on it
            params["espeakng_loader"] = "unknown"
        return params

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Copy the library, check the language and variants exist, and check determinism."""
        missing = {v for vs in VARIANTS_BY_GENDER.values() for v in vs} - available_variants()
        if missing:
            raise ComponentError(f"tts/espeak: voice variants {sorted(missing)} not in the data")
        language = str(self.params["language"])
        try:
            first = synthesize("Hello.", f"{language}+m1", {})
        except ComponentError as exc:
            raise ComponentError(
                f"tts/espeak: parameter language={language!r} is not an eSpeak NG voice ({exc})"
            ) from exc
        second = synthesize("Hello.", f"{language}+m1", {})
        if first[0].tobytes() != second[0].tobytes():
            raise ComponentError(
                "tts/espeak: eSpeak NG was not reset between utterances (the library stayed "
                "loaded), so its output would not be reproducible"
            )
        self._loaded = True

    # -- calls -----------------------------------------------------------------------------
    def voice_settings(self, item: dict[str, Any]) -> tuple[str, dict[int, int]]:
        """The eSpeak voice name and parameters for one item's labels (ValueError on bad labels)."""
        speaker = str(item.get("speaker") or "")
        emotion = _label(item.get("emotion"), "emotion", EMOTIONS, "neutral")
        speed = _label(item.get("speed"), "speed", SPEEDS, "normal")
        pitch = _label(item.get("pitch"), "pitch", PITCHES, "normal")
        gender = resolve_gender(item.get("gender"), speaker)
        variant = voice_for(speaker, gender, VARIANTS_BY_GENDER)
        prosody = EMOTION_PROSODY[emotion]
        p = self.params
        step = {"low": -1, "normal": 0, "high": 1}[pitch] * int(p["pitch_step"])
        settings = {
            _PARAM_RATE: round(float(p[f"wpm_{speed}"]) * prosody.rate),
            _PARAM_PITCH: int(p[f"{gender}_pitch"]) + step + prosody.pitch,
            _PARAM_RANGE: prosody.range,
            _PARAM_VOLUME: round(float(p["volume"]) * prosody.volume),
        }
        return f"{p['language']}+{variant}", settings

    def run_one(self, item: dict[str, Any]) -> Audio | Failure:
        import numpy as np

        text = clean_text(str(item.get("utterance") or ""))
        if not text:
            return Failure("empty_output", "tts/espeak: the utterance is empty")
        try:
            voice, settings = self.voice_settings(item)
        except ValueError as exc:
            return Failure("plan_invalid_label", f"tts/espeak: {exc}")
        if not self._loaded:
            self.load()
        samples, rate = synthesize(text, voice, settings, seed=int(self.params["seed"]))
        if samples.size == 0 or not np.any(samples):
            return Failure("empty_output", f"tts/espeak: no audible speech for {text[:60]!r}")
        return Audio(samples=samples.astype(np.float32) / 32768.0, sample_rate=rate)


__all__ = [
    "EMOTION_PROSODY",
    "EspeakTTS",
    "Prosody",
    "VARIANTS_BY_GENDER",
    "available_variants",
    "clean_text",
    "synthesize",
]
