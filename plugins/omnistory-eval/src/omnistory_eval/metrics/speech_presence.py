"""Whether a clip holds speech, decided before any field of it is judged.

A beep or silence gets pitch and gender labels by chance, so a speech metric must not judge a clip
that holds no speech.  Asking the ASR ("did Whisper hear a word?") is not a decision: what Whisper
hallucinates on a tone depends on the CPU's instruction set (CTranslate2's kernels), and the demo's
noop tone was judged on one machine and not on another.  Here a voice-activity model decides:
Silero VAD v6, the ONNX file faster-whisper ships, run by onnxruntime on one thread over 32 ms
windows of the 16 kHz waveform.  A clip holds speech when at least ``min_speech_s`` of it lies in
windows whose speech probability reaches ``threshold`` (0.5, Silero's default; 0.25 s, Silero's
default minimal speech duration).

The decision is robust by construction rather than bit-exact: flipping it takes several 32 ms
windows crossing the threshold at once, while floating-point differences between kernels move a
probability in its last digits.  Measured on the demo's clips: a spoken line (Piper, eSpeak NG)
has most windows above 0.9; the noop 0.25 s tone has none above 0.47, silence and white noise
none above 0.07.  The detail of every judged clip records the counts it was decided on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omnistory_eval.speech_analysis import SAMPLE_RATE

#: Silero VAD's window at 16 kHz (its model is trained for exactly 512 samples)
WINDOW = 512
WINDOW_S = WINDOW / SAMPLE_RATE
DETECTOR = "silero_vad_v6 (the ONNX file of faster-whisper 1.2.1, onnxruntime, 1 thread)"


@dataclass(frozen=True)
class SpeechPresence:
    """One clip's decision and the numbers it rests on."""

    speech: bool
    speech_windows: int
    windows: int
    threshold: float
    min_speech_s: float

    @property
    def speech_s(self) -> float:
        return round(self.speech_windows * WINDOW_S, 3)

    def to_detail(self) -> dict[str, Any]:
        return {
            "speech": self.speech,
            "speech_s": self.speech_s,
            "speech_windows": self.speech_windows,
            "windows": self.windows,
            "threshold": self.threshold,
            "min_speech_s": self.min_speech_s,
            "detector": DETECTOR,
        }


def decide(probabilities: Any, threshold: float, min_speech_s: float) -> SpeechPresence:
    """The decision over one clip's window probabilities (a pure function of them)."""
    probs = [float(p) for p in probabilities]
    speech_windows = sum(p >= threshold for p in probs)
    return SpeechPresence(
        speech=speech_windows * WINDOW_S >= min_speech_s and speech_windows > 0,
        speech_windows=speech_windows,
        windows=len(probs),
        threshold=float(threshold),
        min_speech_s=float(min_speech_s),
    )


class SileroSpeechPresence:
    """Loads Silero VAD once; :meth:`detect` decides for many 16 kHz mono waveforms."""

    def __init__(self, threshold: float = 0.5, min_speech_s: float = 0.25):
        self.threshold = float(threshold)
        self.min_speech_s = float(min_speech_s)
        self._model: Any = None

    def load(self) -> None:
        # faster-whisper's own session settings (1 thread, no arena): the model file and the
        # runtime are the ones its vad_filter uses
        from faster_whisper.vad import get_vad_model

        self._model = get_vad_model()

    def probabilities(self, wave: Any) -> Any:
        """Per 32 ms window, the speech probability (the last window zero-padded)."""
        import numpy as np

        assert self._model is not None, "load() first"
        audio = np.asarray(wave, dtype=np.float32).reshape(-1)
        if audio.size == 0:
            return np.zeros(0, dtype=np.float32)
        audio = np.pad(audio, (0, (-audio.size) % WINDOW))
        return np.asarray(self._model(audio)).reshape(-1)

    def detect(self, waves: list[Any]) -> list[SpeechPresence]:
        return [decide(self.probabilities(w), self.threshold, self.min_speech_s) for w in waves]
