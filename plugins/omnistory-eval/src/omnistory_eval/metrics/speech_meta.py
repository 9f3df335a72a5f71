"""Speech metadata accuracy (paper App. E.1 Eq. 3 and App. E.2).

For each generated clip the four fields are predicted — emotion (three-recognizer ensemble), speed
(Whisper word timestamps, energy fallback), pitch (median F0 with gender-dependent thresholds) and
gender (audeering age/gender, windowed) — and each is scored 1.0/0.0 against the target label after
lowercase/strip.  The per-sample accuracy, per-field accuracy and exact match are aggregations of
these four rows (:func:`omnistory_eval.speech_analysis.metadata_accuracy`,
:func:`~omnistory_eval.speech_analysis.exact_match`).

Failure policy: a classifier that fails on an item makes *that criterion* ``None`` (its scores row
is ``invalid``); the other criteria keep their scores and the result status stays ``ok``.  A
failure of the machinery instead (a dead emotion worker, out of memory) makes the whole result an
``error``: it is not stored and the clip is scored again on the next run.  The
status is ``invalid`` only when no criterion could be scored (e.g. an undecodable WAV).  A failed
gender prediction leaves pitch scored with the gender-unknown thresholds (145/220 Hz), as the paper
specifies for unavailable gender; a failed transcription leaves speed ``None``.  A reference
without the four labels is a data error: that item's result is a ``ValueError`` naming the field.
Failing to load any model raises from :meth:`SpeechMetaMetric.load` (``skipped: ...``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any, Protocol

from omnistory_core.components import ComponentError, EvalResult, Metric
from omnistory_core.params import Param
from omnistory_eval.metrics._common import (
    release_torch_memory,
    require_media,
    resolve_device,
)
from omnistory_eval.metrics.age_gender import PAPER_MODEL as GENDER_MODEL
from omnistory_eval.metrics.age_gender import AgeGenderClassifier
from omnistory_eval.metrics.asr import PAPER_MODEL as WHISPER_MODEL
from omnistory_eval.metrics.asr import WhisperWordTimestamps
from omnistory_eval.metrics.emotion import PAPER_MEMBERS, EmotionEnsemble
from omnistory_eval.outcomes import is_infrastructure_exception
from omnistory_eval.speech_analysis import (
    FIELDS,
    SAMPLE_RATE,
    Thresholds,
    estimate_f0,
    field_matches,
    load_speech,
    pitch_label,
    speaking_rate,
    speed_label,
)

#: what an in-process emotion recognizer imports (see emotion_backends)
EMOTION_PACKAGES: dict[str, tuple[str, ...]] = {
    "speechbrain": ("speechbrain", "torchaudio"),
    "hubert": ("transformers", "torch"),
    "emotion2vec": ("funasr",),
}


def reference_labels(item: dict[str, Any]) -> dict[str, str]:
    """The four target labels of an item; ValueError naming the missing field otherwise."""
    return target_labels(item, FIELDS)


def target_labels(item: dict[str, Any], fields: tuple[str, ...]) -> dict[str, str]:
    """The target labels of ``fields`` in ``item["reference_speech"]``; ValueError naming the
    missing field otherwise (shared with :mod:`~omnistory_eval.metrics.speech_meta_real`)."""
    ref = item.get("reference_speech")
    if not isinstance(ref, dict):
        raise ValueError(
            f"reference_speech must be a dict of target labels, got {type(ref).__name__}"
        )
    labels = {}
    for f in fields:
        value = ref.get(f)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"reference_speech.{f} is missing or empty (got {value!r})")
        labels[f] = value
    return labels


def _per_item(call: Callable[[list[Any]], list[Any]], inputs: list[Any]) -> list[Any]:
    """``call`` on the whole list; if it raises, item by item so one bad input stays alone."""
    if not inputs:
        return []
    try:
        out = call(inputs)
        if len(out) != len(inputs):
            raise RuntimeError(f"{len(out)} results for {len(inputs)} inputs")
        return out
    except Exception:
        if len(inputs) == 1:
            raise
    results: list[Any] = []
    for x in inputs:
        try:
            results.append(call([x])[0])
        except Exception as exc:
            results.append(exc)
    return results


def _safe(call: Callable[[list[Any]], list[Any]], inputs: list[Any]) -> list[Any]:
    try:
        return _per_item(call, inputs)
    except Exception as exc:
        return [exc] * len(inputs)


def _err(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


# -- what both speech-metadata evaluators share (speech_meta and speech_meta_fw_pya) ------------
class _BeamSearch(Protocol):
    """The ASR wrapper as the result detail reads it (both Whisper wrappers set it on load)."""

    effective_num_beams: int | None


def load_clips(
    items: list[dict[str, Any]],
    labels_of: Callable[[dict[str, Any]], dict[str, str]],
    fields: tuple[str, ...],
    invalid_detail: Callable[[], dict[str, Any]] = dict,
) -> tuple[list[EvalResult | Exception | None], dict[int, dict[str, str]], dict[int, Any]]:
    """The first pass of ``run_batch``: per item its target labels (``labels_of``) and its
    decoded clip (:func:`~omnistory_eval.speech_analysis.load_speech`: untrimmed, trimmed).

    Returns (results, labels by index, clips by index): an item without labels or without a
    candidate file has its ``ValueError`` as result already; an undecodable clip an ``invalid``
    result over ``fields`` whose detail is the error and ``invalid_detail()``.  The items left
    (``sorted(clips)``) are the ones to score."""
    results: list[EvalResult | Exception | None] = [None] * len(items)
    refs: dict[int, dict[str, str]] = {}
    audio: dict[int, tuple[Any, Any]] = {}
    for n, item in enumerate(items):
        try:
            refs[n] = labels_of(item)
            media = require_media(item, "candidate_speech")
        except ValueError as exc:
            results[n] = exc
            continue
        try:
            audio[n] = load_speech(media.path)
        except ValueError as exc:
            results[n] = EvalResult(
                scores=dict.fromkeys(fields),
                status="invalid",
                detail={"error": str(exc), **invalid_detail()},
            )
    return results, refs, audio


def predict_voice(
    predicted: dict[str, str | None],
    detail: dict[str, Any],
    wave: Any,
    transcript: Any,
    gender: Any,
    thresholds: Thresholds,
    asr: _BeamSearch | None,
) -> None:
    """Fill ``predicted``/``detail`` with gender, pitch and speed, the fields both evaluators
    predict the same way: a failed gender leaves pitch on the gender-unknown thresholds, a
    failed transcription leaves speed ``None``; each failure is under ``detail["errors"]``."""
    if isinstance(gender, Exception):
        detail["errors"]["gender"] = _err(gender)
        gender_label = None
    else:
        gender_label = predicted["gender"] = gender.label
        detail["gender_probs"] = gender.probabilities
        detail["gender_windows"] = gender.windows
    f0 = estimate_f0(wave, SAMPLE_RATE)
    predicted["pitch"] = pitch_label(f0.median_hz, gender_label, thresholds)
    detail["median_f0_hz"], detail["f0_method"] = f0.median_hz, f0.method
    if isinstance(transcript, Exception):
        detail["errors"]["speed"] = _err(transcript)
    else:
        rate = speaking_rate(transcript.text, transcript.chunks, wave, SAMPLE_RATE)
        predicted["speed"] = speed_label(rate.units_per_second, thresholds)
        detail["transcript"] = transcript.to_detail()
        assert asr is not None, "load() first"
        detail["asr_num_beams"] = asr.effective_num_beams
        detail["units_per_second"], detail["speed_method"] = rate.units_per_second, rate.method


def verdict(
    fields: tuple[str, ...],
    ref: dict[str, str],
    predicted: dict[str, str | None],
    detail: dict[str, Any],
    outcomes: tuple[Any, ...],
) -> EvalResult:
    """The result of one clip from its predictions: an ``error`` when a model's failure in
    ``outcomes`` is the machinery's (scored again next run), else each of ``fields`` matched
    against ``ref`` (``invalid`` when none could be)."""
    infrastructure = [
        _err(x) for x in outcomes if isinstance(x, Exception) and is_infrastructure_exception(x)
    ]
    if infrastructure:  # not a verdict on this clip: an error row, scored again next run
        detail["error"] = "; ".join(infrastructure)
        return EvalResult(scores=dict.fromkeys(fields), status="error", detail=detail)
    if not detail["errors"]:
        del detail["errors"]
    matches = field_matches(predicted, ref)
    scores = {f: matches.get(f) for f in fields}
    status = "ok" if any(v is not None for v in scores.values()) else "invalid"
    return EvalResult(scores=scores, status=status, detail=detail)


class SpeechMetaMetric(Metric):
    """``speech_meta``: emotion/speed/pitch/gender of the generated speech vs the target labels.

    Parameters (defaults = the paper): ``whisper_model``, ``gender_model``, ``emotion_models``
    (backend -> checkpoint, in ensemble order: speechbrain, hubert, emotion2vec),
    ``calibration`` (path to a thresholds JSON, None = paper thresholds), ``language`` (Whisper
    language hint, None = detect), ``asr_num_beams`` (None = the transformers pipeline default,
    recorded in the detail; see :mod:`~omnistory_eval.metrics.asr`), ``asr_input``
    ("path", the paper: the file path goes to the Whisper pipeline, which decodes it with ffmpeg;
    "array": the untrimmed librosa signal),
    ``speechbrain_log_scores`` ("auto" exponentiates SpeechBrain's
    log posteriors; "never" clips negatives like the public harness).  Runtime only: ``device``,
    ``emotion_python`` (backend -> interpreter of another environment that runs that recognizer),
    ``worker_dir``, ``asr_batch_size``, ``batch_size``.
    """

    name = "speech_meta"
    version = "1"
    track = "speech"
    criteria = FIELDS
    reads = ("candidate_speech", "reference_speech")
    default_batch_size = 16
    description = "speech metadata accuracy: Whisper/pyin/audeering/3-model emotion ensemble"
    parameters = (
        Param(
            "whisper_model", str, WHISPER_MODEL, "ASR with word timestamps (speed)", weights=True
        ),
        Param(
            "gender_model", str, GENDER_MODEL, "age/gender classifier (3.0 s windows)", weights=True
        ),
        Param(
            "emotion_models",
            dict,
            dict(PAPER_MEMBERS),
            "backend -> checkpoint: the equal-weight emotion ensemble, in this order",
        ),
        Param(
            "calibration",
            str,
            None,
            "path to a thresholds JSON (speed, pitch by gender); null: the paper's thresholds"
            " (the thresholds, not the path, are in the cache key)",
        ),
        Param("language", str, None, "Whisper language hint; null: detect"),
        Param(
            "asr_input",
            str,
            "path",
            "path: Whisper's pipeline decodes the original file with ffmpeg (the paper); array:"
            " the untrimmed 16 kHz librosa signal (no ffmpeg)",
            choices=("path", "array"),
        ),
        Param(
            "asr_num_beams",
            int,
            None,
            "beams of the ASR pipeline; null: the transformers default (5 in 5.x)",
            ge=1,
        ),
        Param(
            "speechbrain_log_scores",
            str,
            "auto",
            "auto: exp() of SpeechBrain's log posteriors; never: clip like the public harness",
            choices=("auto", "never"),
        ),
        Param("device", (str, None), "auto", "auto | cpu | cuda[:N]", runtime=True),
        Param(
            "emotion_python",
            (dict, None),
            {"speechbrain": None, "emotion2vec": None},
            "backend -> python interpreter of another environment that runs that recognizer"
            " (e.g. .venvs/tts/bin/python: SpeechBrain needs torchaudio, emotion2vec funasr)",
            runtime=True,
        ),
        Param(
            "worker_dir",
            str,
            None,
            "working directory of those workers; null: a temporary one",
            runtime=True,
        ),
        Param("asr_batch_size", int, 8, "ASR items per call", runtime=True, ge=1),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        calibration = self.params["calibration"]
        self.thresholds = Thresholds.from_json(calibration) if calibration else Thresholds()
        self._asr: WhisperWordTimestamps | None = None
        self._gender: AgeGenderClassifier | None = None
        self._emotion: EmotionEnsemble | None = None

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        members = params.get("emotion_models") or PAPER_MEMBERS
        return [
            params.get("whisper_model") or WHISPER_MODEL,
            params.get("gender_model") or GENDER_MODEL,
            *members.values(),
        ]

    def output_params(self) -> dict[str, Any]:
        # the thresholds, not the calibration file's path, decide the labels
        out = super().output_params()
        out.pop("calibration", None)
        out["thresholds"] = self.thresholds.to_dict()
        return out

    def preflight_needs(self) -> list[Any]:
        """Packages, checkpoints and emotion-worker interpreters, checked by ``evaluate`` before
        scoring anything."""
        from omnistory_eval.preflight import (
            METRICS_EXTRA,
            Need,
            package_need,
            weights_need,
        )

        needs = [package_need(m, METRICS_EXTRA) for m in ("transformers", "torch", "librosa")]
        if self.params["asr_input"] == "path" and shutil.which("ffmpeg") is None:
            needs.append(
                Need(
                    "config",
                    "ffmpeg",
                    "install ffmpeg (apt-get install ffmpeg, conda install ffmpeg), or set "
                    "metric.speech_meta.asr_input=array to decode with librosa",
                    "asr_input=path: the Whisper pipeline decodes the audio file with the ffmpeg "
                    "binary, which is not on PATH",
                )
            )
        workers = dict(self.params.get("emotion_python") or {})
        for backend in dict(self.params["emotion_models"]):
            python = workers.get(backend)
            setting = f"metric.speech_meta.emotion_python.{backend}"
            if python:
                needs.append(Need("interpreter", str(python), f"create it or correct {setting}"))
                continue
            for module in EMOTION_PACKAGES.get(backend, ()):
                needs.append(
                    package_need(
                        module,
                        f"pip install {module}, or set {setting}="
                        "<python of an environment that has it>",
                    )
                )
        return needs + [
            weights_need(c, "metric=speech_meta") for c in self.checkpoints(self.params)
        ]

    def load(self) -> None:
        from omnistory_core.kit.hub import load_cache_first

        # one decision for all five checkpoints; emotion workers inherit the offline mode
        load_cache_first(self.checkpoints(self.params), self._load)

    def _load(self) -> None:
        p = self.params
        if p["asr_input"] == "path" and shutil.which("ffmpeg") is None:
            raise ComponentError(
                "skipped: asr_input=path needs the ffmpeg binary (the Whisper pipeline decodes the "
                "file with it); install ffmpeg or set asr_input=array"
            )
        device = resolve_device(p.get("device"))
        asr = WhisperWordTimestamps(
            p["whisper_model"],
            device,
            int(p.get("asr_batch_size") or 8),
            p["language"],
            num_beams=p["asr_num_beams"],
        )
        gender = AgeGenderClassifier(p["gender_model"], device)
        emotion = EmotionEnsemble(
            dict(p["emotion_models"]),
            device,
            p.get("emotion_python"),
            p["speechbrain_log_scores"],
            p.get("worker_dir"),
        )
        asr.load()
        gender.load()
        emotion.start()
        self._asr, self._gender, self._emotion = asr, gender, emotion

    def unload(self) -> None:
        if self._emotion is not None:
            self._emotion.close()
        self._asr = self._gender = self._emotion = None
        release_torch_memory()

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult | Exception]:
        assert self._asr and self._gender and self._emotion, "load() first"
        results, refs, audio = load_clips(items, reference_labels, FIELDS)
        order = sorted(audio)
        if self.params["asr_input"] == "path":  # the paper: the pipeline decodes the file
            full = [str(require_media(items[n], "candidate_speech").path) for n in order]
        else:
            full = [audio[n][0] for n in order]
        trimmed = [audio[n][1] for n in order]
        transcripts = _safe(self._asr.transcribe, full)
        genders = _safe(self._gender.predict, trimmed)
        emotions = _safe(self._emotion.predict, trimmed)
        for k, n in enumerate(order):
            results[n] = self._score(refs[n], trimmed[k], transcripts[k], genders[k], emotions[k])
        return results  # type: ignore[return-value]

    def _score(
        self, ref: dict[str, str], wave: Any, transcript: Any, gender: Any, emotion: Any
    ) -> EvalResult:
        predicted: dict[str, str | None] = dict.fromkeys(FIELDS)
        detail: dict[str, Any] = {"errors": {}}
        predict_voice(predicted, detail, wave, transcript, gender, self.thresholds, self._asr)
        if isinstance(emotion, Exception):
            detail["errors"]["emotion"] = _err(emotion)
        else:
            predicted["emotion"] = emotion.label
            detail["emotion_probs"] = emotion.probabilities
            detail["emotion_members"] = emotion.members
        detail["predicted"] = predicted
        return verdict(FIELDS, ref, predicted, detail, (transcript, gender, emotion))
