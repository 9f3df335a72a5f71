"""``tts/voxcpm``: VoxCPM2 as a TTS expert (the paper's expert V)."""

from __future__ import annotations

import unicodedata
from typing import Any, ClassVar

from omnistory_core.api import Audio, ComponentError, Failure, Param, ParamError, TTSExpert
from omnistory_voxcpm.description import (
    DEFAULT_VOCABULARY,
    Vocabulary,
    controlled_text,
    voice_labels,
)


def clean_text(text: str) -> str:
    """The utterance with control characters turned into spaces and runs of whitespace
    collapsed (VoxCPM collapses whitespace itself; doing it here keeps the cache key honest)."""
    return " ".join("".join(" " if unicodedata.category(c) == "Cc" else c for c in text).split())


class VoxCPMTTS(TTSExpert):
    """VoxCPM2 (``openbmb/VoxCPM2`` by default) in voice-design mode, 48 kHz output.

    The utterance is prefixed with a parenthesised voice description,
    ``"(female voice, soft and gentle timbre, sad and downcast tone, slow pace, medium pitch,
    clear recording)Where did it go?"`` (``omnistory_voxcpm.description``): gender, a timbre
    phrase chosen from the speaker name by a stable hash (so a character is described, and with the
    fixed seed voiced, the same way on every page), then emotion, speed and pitch.  A missing or
    unknown gender is resolved from the speaker name, half of all names to each gender.  No
    reference audio is used (the official Omni-StoryBench code also uses voice design only).

    Emotion: VoxCPM2's voice design accepts emotion words, so emotion is stated directly as a tone
    phrase; how faithfully the real model follows it is not verified by this package's tests.

    Determinism: the torch generator is re-seeded with ``seed`` before every utterance, and items
    are generated one at a time (VoxCPM's API takes one text), so an item's audio depends only on
    its inputs, parameters, device and library versions.  ``device`` and ``optimize``
    (``torch.compile`` on CUDA) are runtime parameters, not part of the cache key.

    A missing speed/pitch/emotion means ``normal``/``neutral``; a label outside the contract is a
    ``plan_invalid_label`` failure; an empty utterance or an all-silent waveform is
    ``empty_output``.  Output: float32 mono at ``tts_model.sample_rate`` (48 kHz for VoxCPM2).
    """

    name = "voxcpm"
    version = "1"
    reads = ("utterance", "speaker", "emotion", "speed", "pitch", "gender")
    description = "VoxCPM2 voice design (parenthesised voice description), 48 kHz"
    # voxcpm imports torchaudio at import time; PyPI's torchaudio imports only beside torch 2.9.1
    # among the torch builds pip can install here.  torchcodec (reference-audio loading only) is
    # pinned to a release of the torch 2.9 period.
    requirements: ClassVar[tuple[str, ...]] = (
        "voxcpm==2.0.3",
        "torch==2.9.1",
        "torchaudio==2.9.1",
        "torchcodec==0.8.1",
    )

    parameters = (
        Param(
            "model",
            str,
            "openbmb/VoxCPM2",
            "hub id or local directory (config.json + weights)",
            weights=True,
        ),
        Param("device", str, "auto", "auto (cuda, mps, cpu) | cpu | cuda[:N]", runtime=True),
        Param("optimize", bool, True, "torch.compile on CUDA (ignored elsewhere)", runtime=True),
        Param("cfg_value", float, 2.0, "guidance scale (official value)", gt=0),
        Param("inference_timesteps", int, 10, "diffusion steps per patch (official value)", ge=1),
        Param("max_len", int, 4096, "maximum generated audio tokens", ge=1),
        Param("normalize", bool, False, "VoxCPM's text normalisation (off, as the official code)"),
        Param("retry_badcase", bool, True, "regenerate outputs far too long for their text"),
        Param("gender_phrases", dict, DEFAULT_VOCABULARY.gender, "words per gender"),
        Param("male_characters", list, DEFAULT_VOCABULARY.characters["male"], "male timbres"),
        Param("female_characters", list, DEFAULT_VOCABULARY.characters["female"], "female timbres"),
        Param("tone_phrases", dict, DEFAULT_VOCABULARY.tone, "tone phrase per emotion"),
        Param("pace_phrases", dict, DEFAULT_VOCABULARY.pace, "words for slow/normal/fast"),
        Param("pitch_phrases", dict, DEFAULT_VOCABULARY.pitch, "words for low/normal/high"),
        Param("recording", str, DEFAULT_VOCABULARY.recording, "last phrase of the description"),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        p = self.params
        try:
            self.vocabulary = Vocabulary(
                gender=p["gender_phrases"],
                characters={"male": p["male_characters"], "female": p["female_characters"]},
                tone=p["tone_phrases"],
                pace=p["pace_phrases"],
                pitch=p["pitch_phrases"],
                recording=p["recording"],
            )
        except ValueError as exc:
            raise ParamError(f"tts={self.name}: {exc}") from None
        self.model: Any = None

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Load VoxCPM (``model`` is a hub id or a local directory with ``config.json``)."""
        from voxcpm import VoxCPM

        p = self.params
        device = None if str(p["device"]) == "auto" else str(p["device"])
        try:
            # The denoiser only cleans reference audio, which voice design never uses.
            self.model = VoxCPM.from_pretrained(
                p["model"], load_denoiser=False, optimize=bool(p["optimize"]), device=device
            )
        except (OSError, ValueError) as exc:
            raise ComponentError(f"tts/voxcpm: cannot load model {p['model']!r}: {exc}") from exc

    def unload(self) -> None:
        if self.model is not None:
            device = str(getattr(self.model.tts_model, "device", ""))
            self.model = None
            if device.startswith("cuda"):
                import torch

                torch.cuda.empty_cache()

    @property
    def sample_rate(self) -> int:
        return int(self.model.tts_model.sample_rate)

    # -- calls -----------------------------------------------------------------------------
    def prompt(self, item: dict[str, Any]) -> str:
        """The text VoxCPM receives for one item (``ValueError`` on an invalid label or an
        empty utterance)."""
        text = clean_text(str(item.get("utterance") or ""))
        if not text:
            raise ValueError("the utterance is empty")
        return controlled_text(text, voice_labels(item), self.vocabulary)

    def run_one(self, item: dict[str, Any]) -> Audio | Failure:
        if not clean_text(str(item.get("utterance") or "")):
            return Failure("empty_output", "tts/voxcpm: the utterance is empty")
        try:
            prompt = self.prompt(item)
        except ValueError as exc:
            return Failure("plan_invalid_label", f"tts/voxcpm: {exc}")
        if self.model is None:
            self.load()
        samples = self._generate(prompt)
        if samples.size == 0 or not (abs(samples) > 0).any():
            return Failure("empty_output", f"tts/voxcpm: silent output for {prompt[:80]!r}")
        return Audio(samples=samples, sample_rate=self.sample_rate)

    def _generate(self, prompt: str):
        import numpy as np
        import torch

        p = self.params
        torch.manual_seed(int(p["seed"]))  # seeds the CPU and every CUDA generator
        wav = self.model.generate(
            text=prompt,
            cfg_value=float(p["cfg_value"]),
            inference_timesteps=int(p["inference_timesteps"]),
            max_len=int(p["max_len"]),
            normalize=bool(p["normalize"]),
            retry_badcase=bool(p["retry_badcase"]),
        )
        samples = np.asarray(wav, dtype=np.float32).reshape(-1)
        if not np.isfinite(samples).all():
            raise ComponentError("tts/voxcpm: the model produced non-finite samples")
        return samples


__all__ = ["VoxCPMTTS", "clean_text"]
