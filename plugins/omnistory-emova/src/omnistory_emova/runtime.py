"""The model side of ``backbone=emova`` (imports torch and transformers; loaded by ``load()``).

Loading follows EMOVA's model card and the official runner: ``AutoModel`` and ``AutoProcessor``
with ``trust_remote_code=True`` (the model in bfloat16 with SDPA attention), then the speech
tokenizer (``AutoModel``, float32, remote code) handed to ``processor.set_speech_tokenizer``.
Calls: ``processor(text=<conversation>, images=..., return_tensors="pt")``,
``model.generate(**inputs, ...)`` (returns prompt + new tokens), and
``processor.batch_decode(new, skip_special_tokens=True, speaker=..., output_wav_prefix=...)``,
which writes ``<prefix>_0.wav`` through the speech tokenizer (and returns the wav paths).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from typing import Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from omnistory_core.api import Audio, ComponentError

#: EMOVA's speech codebook: the tokens ``<|speech_0|>`` .. ``<|speech_4095|>``
SPEECH_UNITS = 4096


class SpeechUnitsOnly(LogitsProcessor):
    """Keep only the given token ids (the speech units and EOS): every other logit becomes -inf,
    so greedy decoding can emit nothing but speech units until it stops."""

    def __init__(self, allowed_ids: Iterable[int]):
        ids = sorted({int(i) for i in allowed_ids})
        if not ids:
            raise ValueError("SpeechUnitsOnly needs at least one allowed token id")
        self.allowed = torch.tensor(ids, dtype=torch.long)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        allowed = self.allowed[self.allowed < scores.shape[-1]].to(scores.device)
        masked = torch.full_like(scores, float("-inf"))
        masked[:, allowed] = scores[:, allowed]
        return masked


def speech_unit_ids(tokenizer: Any, units: int = SPEECH_UNITS) -> dict[int, int]:
    """token id -> unit number for every ``<|speech_N|>`` the tokenizer knows as one token."""
    unk = getattr(tokenizer, "unk_token_id", None)
    found: dict[int, int] = {}
    for unit in range(units):
        token = f"<|speech_{unit}|>"
        token_id = tokenizer.convert_tokens_to_ids(token)
        if not isinstance(token_id, int) or token_id == unk or token_id < 0:
            continue
        if tokenizer.convert_ids_to_tokens(token_id) == token:
            found[token_id] = unit
    return found


def eos_ids(tokenizer: Any, model: Any) -> list[int]:
    """The ids that end a reply: the tokenizer's EOS, else the generation config's."""
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is None:
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, list | tuple) else [eos])]


def dtype_kwargs(dtype: torch.dtype) -> dict[str, Any]:
    """``from_pretrained`` keywords for a dtype: EMOVA's transformers 4.47 takes ``torch_dtype``
    (and ``low_cpu_mem_usage``, as the model card passes it); 4.56+ names it ``dtype``."""
    from importlib.metadata import version

    major, minor = (int(p) for p in version("transformers").split(".")[:2])
    if (major, minor) >= (4, 56):
        return {"dtype": dtype}
    return {"torch_dtype": dtype, "low_cpu_mem_usage": True}


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ComponentError(f"backbone=emova: device={device!r} but no CUDA device is visible")
    return device


def resolve_dtype(name: str, device: str) -> torch.dtype:
    if name == "auto":
        name = "float32" if device == "cpu" else "bfloat16"
    return getattr(torch, name)


def describe_load_error(exc: BaseException) -> str:
    """A hint for the usual reasons loading EMOVA fails."""
    text = f"{type(exc).__name__}: {exc}"
    lowered = text.lower()
    if "emova_speech_tokenizer" in lowered and isinstance(exc, ImportError):
        return (
            text + " -- the speech tokenizer's remote code needs the git-only "
            "emova_speech_tokenizer package: pip install -e a checkout of "
            "https://github.com/emova-ollm/EMOVA_speech_tokenizer (see the plugin README)"
        )
    if isinstance(exc, ImportError):
        return text + " -- EMOVA's remote code needs a package missing here (see the README)"
    if "offline" in lowered or "LocalEntryNotFoundError" in type(exc).__name__:
        return text + " -- not in the local cache and the hub cannot be reached (HF_HUB_OFFLINE?)"
    return text


class EmovaRuntime:
    """The loaded model, processor (with its speech tokenizer) and the speech-unit vocabulary."""

    def __init__(
        self, model: Any, processor: Any, device: str, unit_ids: dict[int, int], stop_ids: list[int]
    ):
        self.model = model
        self.processor = processor
        self.device = device
        self.unit_ids = unit_ids
        self.stop_ids = stop_ids
        self.units_only = SpeechUnitsOnly([*unit_ids, *stop_ids])

    @classmethod
    def load(cls, settings: Any) -> EmovaRuntime:
        from transformers import AutoModel, AutoProcessor

        device = resolve_device(settings.device)
        dtype = resolve_dtype(settings.dtype, device)

        def pinned(revision: str | None) -> dict[str, Any]:
            return {"revision": revision} if revision else {}

        try:
            model = AutoModel.from_pretrained(
                settings.model,
                trust_remote_code=True,
                attn_implementation=settings.attn_implementation,
                **dtype_kwargs(dtype),
                **pinned(settings.revision),
            )
            processor = AutoProcessor.from_pretrained(
                settings.model, trust_remote_code=True, **pinned(settings.revision)
            )
        except Exception as exc:
            raise ComponentError(
                f"backbone=emova: cannot load {settings.model!r}: {describe_load_error(exc)}"
            ) from exc
        try:
            speech_tokenizer = AutoModel.from_pretrained(
                settings.speech_tokenizer,
                trust_remote_code=True,
                **dtype_kwargs(torch.float32),
                **pinned(settings.speech_tokenizer_revision),
            )
        except Exception as exc:
            raise ComponentError(
                f"backbone=emova: cannot load the speech tokenizer "
                f"{settings.speech_tokenizer!r}: {describe_load_error(exc)}"
            ) from exc
        model = model.eval().to(device)
        processor.set_speech_tokenizer(speech_tokenizer.eval().to(device))
        unit_ids = speech_unit_ids(processor.tokenizer)
        if not unit_ids:
            raise ComponentError(
                f"backbone=emova: the tokenizer of {settings.model!r} has no "
                "<|speech_N|> tokens: not an EMOVA checkpoint?"
            )
        stop_ids = eos_ids(processor.tokenizer, model)
        return cls(model, processor, device, unit_ids, stop_ids)

    def close(self) -> None:
        self.model = self.processor = None
        self.after_error()

    def after_error(self) -> None:
        if self.device and self.device.startswith("cuda"):
            import gc

            gc.collect()
            torch.cuda.empty_cache()

    # -- passes -----------------------------------------------------------------------------
    def _generate(self, messages: list[dict[str, Any]], image: Any, **kwargs: Any):
        if image is None:
            inputs = self.processor(text=messages, return_tensors="pt")
        else:
            inputs = self.processor(text=messages, images=image, return_tensors="pt")
        inputs = inputs.to(self.model.device)
        prompt_length = inputs["input_ids"].shape[1]
        with torch.inference_mode():
            output = self.model.generate(**inputs, do_sample=False, **kwargs)
        return output[:, prompt_length:], prompt_length

    def generate_reply(
        self,
        messages: list[dict[str, Any]],
        image: Any,
        *,
        max_new_tokens: int,
        no_repeat_ngram_size: int,
    ) -> tuple[str, dict[str, int]]:
        """Pass 1: the decoded reply (special tokens skipped) and its token counts."""
        kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens}
        if no_repeat_ngram_size:
            kwargs["no_repeat_ngram_size"] = no_repeat_ngram_size
        new, prompt_length = self._generate(messages, image, **kwargs)
        text = self.processor.batch_decode(new, skip_special_tokens=True)[0]
        return text, {"prompt_tokens": int(prompt_length), "completion_tokens": int(new.shape[1])}

    def speak(
        self, messages: list[dict[str, Any]], *, speaker: str, max_new_tokens: int
    ) -> tuple[Audio, dict[str, int]]:
        """Pass 2: speech units (only units and EOS allowed), decoded to a waveform by the speech
        tokenizer with ``speaker``.  Raises :class:`ComponentError` when nothing can be spoken."""
        new, prompt_length = self._generate(
            messages,
            None,
            max_new_tokens=max_new_tokens,
            logits_processor=LogitsProcessorList([self.units_only]),
        )
        units = sum(1 for t in new[0].tolist() if t in self.unit_ids)
        usage = {
            "speech_prompt_tokens": int(prompt_length),
            "speech_completion_tokens": int(new.shape[1]),
            "speech_units": units,
        }
        if units == 0:
            raise ComponentError(
                "backbone=emova: the speech pass produced no speech units", "empty_output"
            )
        with tempfile.TemporaryDirectory(prefix="omnistory-emova-") as tmp:
            prefix = os.path.join(tmp, "speech")
            returned = self.processor.batch_decode(
                new, skip_special_tokens=True, speaker=speaker, output_wav_prefix=prefix
            )
            path = _written_wav(returned, prefix)
            if path is None:
                raise ComponentError(
                    f"backbone=emova: the speech tokenizer wrote no wav for {units} units "
                    f"(batch_decode returned {str(returned)[:200]!r})",
                    "model_error",
                )
            audio = read_wav(path)
        return audio, usage


def _written_wav(returned: Any, prefix: str) -> str | None:
    """The wav ``batch_decode`` wrote: the path it returned, else ``<prefix>_0.wav``."""
    first = returned[0] if isinstance(returned, list | tuple) and returned else returned
    if isinstance(first, str) and first.endswith(".wav") and os.path.isfile(first):
        return first
    default = f"{prefix}_0.wav"
    return default if os.path.isfile(default) else None


def read_wav(path: str) -> Audio:
    """A wav file -> mono float32 :class:`Audio` at the file's own rate."""
    import numpy as np
    import soundfile as sf

    samples, rate = sf.read(path, dtype="float32", always_2d=True)
    mono = samples.mean(axis=1) if samples.shape[1] > 1 else samples[:, 0]
    if mono.size == 0:
        raise ComponentError(
            "backbone=emova: the speech tokenizer wrote an empty wav", "empty_output"
        )
    if not np.isfinite(mono).all():
        raise ComponentError(
            "backbone=emova: non-finite samples in the decoded speech", "empty_output"
        )
    return Audio(samples=np.clip(mono, -1.0, 1.0).astype(np.float32), sample_rate=int(rate))


__all__ = [
    "SPEECH_UNITS",
    "EmovaRuntime",
    "SpeechUnitsOnly",
    "dtype_kwargs",
    "eos_ids",
    "read_wav",
    "speech_unit_ids",
]
