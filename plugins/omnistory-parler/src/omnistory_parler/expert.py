"""``tts/parler``: Parler-TTS Large v1 as a TTS expert (the paper's expert P)."""

from __future__ import annotations

import unicodedata
from typing import Any, ClassVar

from omnistory_core.api import Audio, ComponentError, Failure, Param, ParamError, TTSExpert
from omnistory_parler.description import (
    DEFAULT_VOCABULARY,
    VOICE_HASHES,
    Vocabulary,
    official_voice,
    parler_description,
    voice_labels,
)

DTYPES = ("float32", "float16", "bfloat16")


def clean_text(text: str) -> str:
    """The utterance with control characters turned into spaces and runs of whitespace
    collapsed (the tokenizer would otherwise see them as content)."""
    return " ".join("".join(" " if unicodedata.category(c) == "Cc" else c for c in text).split())


class ParlerTTS(TTSExpert):
    """Parler-TTS (``parler-tts/parler-tts-large-v1`` by default) steered by a voice description.

    Each utterance is spoken by a named Parler voice chosen from the speaker name: the gender label
    selects the pool (male Jon/Gary/Mike, female Lea/Jenna/Laura, as in the official Omni-StoryBench
    code) and a stable hash of the normalised name selects the voice, so a character keeps its voice
    on every page; an unknown gender is resolved from the name, half of all names to each gender.
    ``voice_hash=official`` uses the official runner's rule instead
    (:func:`omnistory_parler.description.official_voice`).
    The description adds the speed and pitch labels in the words of Parler's training annotations
    (``omnistory_parler.description``).

    Emotion: Parler-TTS v1 was not trained on emotion.  An emotion is rendered as (1) the trained
    *expressivity* attribute (happy/angry -> "very expressive and animated", sad -> "quite
    monotone", neutral -> "slightly expressive") and (2) an untrained tone phrase ("sounds sad and
    subdued") that the T5 text encoder reads as language but the decoder was never taught to
    follow.  Emotion never changes the speed or pitch words, which are labels of their own.  The
    audible effect on the real model is not verified by this package's tests.

    Determinism: items are generated one at a time (sampling in a padded batch would make an
    utterance depend on its neighbours) and the torch generator is re-seeded with ``seed`` before
    each, so an item's audio depends only on its inputs, parameters, device and library versions.

    A missing speed/pitch/emotion means ``normal``/``neutral``; a label outside the contract is a
    ``plan_invalid_label`` failure; an empty utterance or an all-silent waveform is
    ``empty_output``.  Output: float32 mono at ``model.config.sampling_rate`` (44.1 kHz for
    large-v1).
    """

    name = "parler"
    version = "1"
    reads = ("utterance", "speaker", "emotion", "speed", "pitch", "gender")
    description = "Parler-TTS Large v1 (voice description from gender, pitch, speed, emotion)"
    # parler-tts 0.2.3 pins transformers 4.46.1 exactly; torchaudio (imported by the DAC codec's
    # audiotools) imports only with torch 2.9.1 among the torch builds pip can install here.
    requirements: ClassVar[tuple[str, ...]] = (
        "parler-tts==0.2.3",
        "transformers==4.46.1",
        "torch==2.9.1",
        "torchaudio==2.9.1",
    )

    parameters = (
        Param(
            "model",
            str,
            "parler-tts/parler-tts-large-v1",
            "hub id or local directory",
            weights=True,
        ),
        Param("revision", str, None, "hub revision (branch, tag or commit); null: default branch"),
        # in the cache key only when it differs from `revision` (see output_params)
        Param(
            "tokenizer_revision",
            str,
            None,
            "the tokenizer's revision; null: `revision` (the official runner: main)",
        ),
        Param("dtype", str, "float32", "weights dtype", choices=DTYPES),
        Param("device", str, "auto", "auto (cuda if available) | cpu | cuda[:N]", runtime=True),
        Param("do_sample", bool, True, "sample (Parler's default; re-seeded per utterance)"),
        Param("temperature", float, 1.0, "sampling temperature", gt=0),
        Param("max_new_tokens", int, None, "null: the checkpoint's (~30 s for large-v1)", ge=1),
        Param("male_voices", list, DEFAULT_VOCABULARY.voices["male"], "male voice pool"),
        Param("female_voices", list, DEFAULT_VOCABULARY.voices["female"], "female voice pool"),
        Param("speed_phrases", dict, DEFAULT_VOCABULARY.speed, "words for slow/normal/fast"),
        Param("pitch_phrases", dict, DEFAULT_VOCABULARY.pitch, "words for low/normal/high"),
        Param("emotion_delivery", dict, DEFAULT_VOCABULARY.delivery, "expressivity per emotion"),
        Param("emotion_tone", dict, DEFAULT_VOCABULARY.tone, "tone phrase per emotion"),
        Param("recording", str, DEFAULT_VOCABULARY.recording, "last sentence of the description"),
        Param(
            "voice_hash",
            str,
            "ours",
            "voice from the speaker name: ours (salted, gender-balanced) | official",
            choices=VOICE_HASHES,
            key_at_default=False,  # added after caches were written
        ),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        p = self.params
        try:
            self.vocabulary = Vocabulary(
                voices={"male": p["male_voices"], "female": p["female_voices"]},
                speed=p["speed_phrases"],
                pitch=p["pitch_phrases"],
                delivery=p["emotion_delivery"],
                tone=p["emotion_tone"],
                recording=p["recording"],
            )
        except ValueError as exc:
            raise ParamError(f"tts={self.name}: {exc}") from None
        self.model: Any = None
        self.tokenizer: Any = None
        self.device: str | None = None

    @property
    def tokenizer_revision(self) -> str | None:
        """The tokenizer's revision: ``tokenizer_revision``, or ``revision`` where it is null."""
        p = self.params
        return (p["tokenizer_revision"] or p["revision"]) or None

    def output_params(self) -> dict[str, Any]:
        params = super().output_params()
        # added after caches were written: in the key only when the tokenizer really differs
        params.pop("tokenizer_revision", None)
        if self.tokenizer_revision != (self.params["revision"] or None):
            params["tokenizer_revision"] = self.tokenizer_revision
        return dict(sorted(params.items()))

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Load the model and tokenizer (``model`` is a hub id or a local directory)."""
        import torch
        from parler_tts import ParlerTTSForConditionalGeneration
        from transformers import AutoTokenizer

        p = self.params
        device = str(p["device"])
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        revision = p["revision"] or None
        try:
            model = ParlerTTSForConditionalGeneration.from_pretrained(
                p["model"], revision=revision, torch_dtype=getattr(torch, p["dtype"])
            )
            # the official runner loads the model at a revision and the tokenizer from the
            # default branch: tokenizer_revision keeps the two apart
            tokenizer = AutoTokenizer.from_pretrained(p["model"], revision=self.tokenizer_revision)
        except (OSError, ValueError) as exc:
            raise ComponentError(f"tts/parler: cannot load model {p['model']!r}: {exc}") from exc
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.device = device

    def unload(self) -> None:
        self.model = None
        self.tokenizer = None
        if self.device and self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()

    @property
    def sample_rate(self) -> int:
        return int(self.model.config.sampling_rate)

    # -- calls -----------------------------------------------------------------------------
    def describe(self, item: dict[str, Any]) -> str:
        """The voice description for one item (``ValueError`` on an invalid label)."""
        labels = voice_labels(item)
        voice = None
        if self.params["voice_hash"] == "official":
            voice = official_voice(item.get("speaker"), item.get("gender"), self.vocabulary)
        return parler_description(labels, self.vocabulary, voice=voice)

    def run_one(self, item: dict[str, Any]) -> Audio | Failure:
        text = clean_text(str(item.get("utterance") or ""))
        if not text:
            return Failure("empty_output", "tts/parler: the utterance is empty")
        try:
            description = self.describe(item)
        except ValueError as exc:
            return Failure("plan_invalid_label", f"tts/parler: {exc}")
        if self.model is None:
            self.load()
        samples = self._generate(description, text)
        if samples.size == 0 or not (abs(samples) > 0).any():
            return Failure("empty_output", f"tts/parler: silent output for {text[:60]!r}")
        return Audio(samples=samples, sample_rate=self.sample_rate)

    def _generate(self, description: str, text: str):
        import numpy as np
        import torch

        p = self.params
        seed = int(p["seed"])
        torch.manual_seed(seed)  # seeds the CPU and every CUDA generator
        desc = self.tokenizer(description, return_tensors="pt").to(self.device)
        prompt = self.tokenizer(text, return_tensors="pt").to(self.device)
        kwargs: dict[str, Any] = {"do_sample": bool(p["do_sample"])}
        if kwargs["do_sample"]:
            kwargs["temperature"] = float(p["temperature"])
        if p["max_new_tokens"] is not None:
            kwargs["max_new_tokens"] = int(p["max_new_tokens"])
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=desc.input_ids,
                attention_mask=desc.attention_mask,
                # One unpadded prompt: its mask would be all ones (the official code omits it too).
                prompt_input_ids=prompt.input_ids,
                **kwargs,
            )
        samples = out.to(torch.float32).cpu().numpy().reshape(-1).astype(np.float32)
        if not np.isfinite(samples).all():
            raise ComponentError("tts/parler: the model produced non-finite samples")
        return samples


__all__ = ["DTYPES", "ParlerTTS", "clean_text"]
