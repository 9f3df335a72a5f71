"""Whisper transcription with word timestamps (paper App. E.2: ``openai/whisper-large-v3``).

The transformers ASR pipeline runs with ``return_timestamps="word"``, ``chunk_length_s=30`` and
``task="transcribe"`` (optionally a fixed ``language``); fp16 on CUDA, fp32 on CPU.

Input: :meth:`WhisperWordTimestamps.transcribe` takes, per clip, either the path of the audio file
or a 16 kHz mono float32 waveform. The paper passes "the original audio path" to the pipeline, which
reads the file and decodes it with the ``ffmpeg`` binary to 16 kHz mono float32 (``speech_meta``'s
default, ``asr_input="path"``); with ``asr_input="array"`` the untrimmed 16 kHz mono signal decoded
by librosa is passed instead (no ffmpeg needed). For a 16 kHz mono 16-bit PCM WAV both decodes give
the same samples, hence the same transcript; for other rates the two resamplers differ and the
transcript can too (measured by ``benchmarks/fidelity_checks.py``).

Decoding: ``num_beams=None`` leaves the choice to the installed transformers. The transformers 5.24
ASR pipeline adds ``num_beams=5`` (openai-whisper's CLI default) when the checkpoint's generation
config does not set it, as ``openai/whisper-large-v3``'s does not; without that pipeline default
``generate`` decodes greedily. Which of the two the paper's harness (a transformers-5-based git
revision) got is not documented, so the value actually used is recorded
(:attr:`WhisperWordTimestamps.effective_num_beams`) and can be fixed with ``num_beams``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omnistory_eval.metrics._common import load_or_skip

PAPER_MODEL = "openai/whisper-large-v3"


@dataclass
class Transcript:
    text: str
    chunks: list[dict[str, Any]] = field(default_factory=list)

    def to_detail(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "words": [
                [c.get("text"), *(list(c.get("timestamp") or (None, None)))] for c in self.chunks
            ],
        }


class WhisperWordTimestamps:
    def __init__(
        self,
        model: str = PAPER_MODEL,
        device: str = "cpu",
        batch_size: int = 8,
        language: str | None = None,
        chunk_length_s: int = 30,
        num_beams: int | None = None,
    ):
        self.model_id = model
        self.device = device
        self.batch_size = batch_size
        self.language = language
        self.chunk_length_s = chunk_length_s
        self.num_beams = num_beams
        self.effective_num_beams: int | None = None
        self._pipe: Any = None

    def load(self) -> None:
        import torch
        from transformers import AutoModelForSpeechSeq2Seq, AutoProcessor, pipeline

        mid = self.model_id
        dtype = torch.float16 if self.device.startswith("cuda") else torch.float32
        model = load_or_skip(
            mid, lambda: AutoModelForSpeechSeq2Seq.from_pretrained(mid, dtype=dtype)
        )
        processor = load_or_skip(mid, lambda: AutoProcessor.from_pretrained(mid))
        self._pipe = pipeline(
            "automatic-speech-recognition",
            model=model.eval().to(self.device),
            tokenizer=processor.tokenizer,
            feature_extractor=processor.feature_extractor,
            chunk_length_s=self.chunk_length_s,
            batch_size=self.batch_size,
            device=self.device,
        )
        self.effective_num_beams = self._resolve_num_beams()

    def _resolve_num_beams(self) -> int:
        if self.num_beams is not None:
            return int(self.num_beams)
        model_cfg = self._pipe.model.generation_config.to_diff_dict()
        if "num_beams" in model_cfg:
            return int(model_cfg["num_beams"])
        # the pipeline's own defaults (transformers >= 5); absent attribute = plain generate()
        defaults = getattr(self._pipe, "_generation_defaults", None) or {}
        return int(defaults.get("num_beams", 1))

    def transcribe(self, waveforms: list[Any]) -> list[Transcript]:
        """One transcript per input: a 16 kHz mono float32 waveform, or the path (``str``) of an
        audio file, which the pipeline decodes with ffmpeg (raises if the pipeline fails)."""
        gen: dict[str, Any] = {"task": "transcribe"}
        if self.language:
            gen["language"] = self.language
        if self.num_beams is not None:
            gen["num_beams"] = int(self.num_beams)
        outputs = self._pipe(list(waveforms), return_timestamps="word", generate_kwargs=gen)
        return [
            Transcript(text=str(o.get("text", "")).strip(), chunks=list(o.get("chunks") or []))
            for o in outputs
        ]
