"""Apparent speaker gender with pyAudioAnalysis' pretrained SVM, for offline use.

The paper's gender classifier (audeering wav2vec2, :mod:`~omnistory_eval.metrics.age_gender`) comes
from the hub.  pyAudioAnalysis 0.3.14 (PyPI, Apache-2.0) ships ``svm_rbf_speaker_male_female``, a
scikit-learn RBF SVM over 136 mid-term statistics (1 s windows, 1 s step) of 34 short-term
features and their deltas (50 ms frames), pickled with its normalization (the ``MEANS`` file).
This backend applies it exactly as ``pyAudioAnalysis.audioTrainTest.file_classification`` does —
the file at its own sample rate, mono, untrimmed; window shortened to the clip when the clip is
shorter than 1 s; mid-term features averaged over the clip, normalized; ``predict`` for the label
and ``predict_proba`` for the probabilities.  The file is decoded with librosa instead of
pyAudioAnalysis' reader (the same samples for a WAV up to scale, and pyAudioAnalysis normalizes
the signal to its peak).  Not the paper metric's trimmed 16 kHz signal: on 18 clips of piper's
male joe voice the SVM said male 18/18 on the file as it is, 15/18 on the trimmed 16 kHz signal.

The model was pickled with scikit-learn 0.24.2; newer versions load it with an
``InconsistentVersionWarning``, which is silenced here and recorded as ``sklearn_version`` by the
metric.  No age model of this kind exists, so age is not predicted.
"""

from __future__ import annotations

import warnings
from typing import Any

from omnistory_eval.metrics.age_gender import GenderPrediction
from omnistory_eval.speech_analysis import SAMPLE_RATE

#: pyAudioAnalysis' class names -> the labels of the speech metadata
LABELS = {"male": "male", "female": "female"}


class PyAudioAnalysisGender:
    """Loads the SVM once; :meth:`predict` scores many waveforms.

    ``model_path``: the model pickle (its ``MEANS`` file beside it); None: the installed
    pyAudioAnalysis 0.3.14 ``svm_rbf_speaker_male_female``, sha256-checked."""

    def __init__(self, model_path: str | None = None):
        self.model_path = model_path
        self.resolved_path: str | None = None
        self._svm: Any = None
        self._mean: Any = None
        self._std: Any = None
        self._classes: list[str] = []
        self._windows: tuple[float, float, float, float] = (1.0, 1.0, 0.05, 0.05)
        self._beat = False

    def load(self) -> None:
        # pyAudioAnalysis imports matplotlib at import time: keep it off any display
        import matplotlib

        matplotlib.use("Agg", force=False)
        from pyAudioAnalysis import audioTrainTest

        from omnistory_eval.metrics.assemble import PYAA_GENDER_SVM, provide

        path = self.model_path or str(provide(PYAA_GENDER_SVM))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Trying to unpickle estimator.*")
            loaded = audioTrainTest.load_model(path)
        svm, mean, std, classes, mid_w, mid_s, short_w, short_s, beat = loaded
        unknown = [c for c in classes if str(c).strip().lower() not in LABELS]
        if unknown:
            raise ValueError(f"{path}: not a male/female model (classes {list(classes)})")
        self._svm, self._mean, self._std = svm, mean, std
        self._classes = [LABELS[str(c).strip().lower()] for c in classes]
        self._windows = (float(mid_w), float(mid_s), float(short_w), float(short_s))
        self._beat = bool(beat)
        self.resolved_path = path

    def _one(self, audio: Any) -> GenderPrediction:
        import numpy as np
        from pyAudioAnalysis import MidTermFeatures, audioTrainTest

        if isinstance(audio, str):  # as file_classification: the file's own rate, untrimmed
            import librosa

            wave, sr = librosa.load(audio, sr=None, mono=True)
        else:
            wave, sr = audio, SAMPLE_RATE
        signal = np.asarray(wave, dtype=np.float64).reshape(-1)
        sr = int(sr)
        mid_w, mid_s, short_w, short_s = self._windows
        if signal.size < round(sr * short_w) * 2:
            raise ValueError("no audio to score for gender (shorter than two analysis frames)")
        if signal.size / sr < mid_w:  # as file_classification: one window over a short clip
            mid_w = signal.size / sr
        feats, short_feats, _ = MidTermFeatures.mid_feature_extraction(
            signal, sr, mid_w * sr, mid_s * sr, round(sr * short_w), round(sr * short_s)
        )
        vector = feats.mean(axis=1)
        if self._beat:
            beat, confidence = MidTermFeatures.beat_extraction(short_feats, short_s)
            vector = np.append(vector, [beat, confidence])
        vector = (vector - self._mean) / self._std
        if not np.all(np.isfinite(vector)):
            raise ValueError("gender features are not finite (silent or constant audio)")
        class_id, probs = audioTrainTest.classifier_wrapper(self._svm, "svm_rbf", vector)
        order = [int(c) for c in self._svm.classes_]
        probabilities = {self._classes[c]: float(p) for c, p in zip(order, probs, strict=True)}
        return GenderPrediction(
            label=self._classes[int(class_id)],
            probabilities=probabilities,
            windows=int(feats.shape[1]),
        )

    def predict(self, waveforms: list[Any]) -> list[GenderPrediction | Exception]:
        """One prediction per input: an audio file's path (decoded at its own rate) or a 16 kHz
        mono waveform; a clip that cannot be scored is its own exception."""
        assert self._svm is not None, "load() first"
        out: list[GenderPrediction | Exception] = []
        for wave in waveforms:
            try:
                out.append(self._one(wave))
            except Exception as exc:  # this clip's gender becomes invalid, not the batch's
                out.append(exc)
        return out
