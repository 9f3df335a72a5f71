"""The ``transformers`` backend: ``Qwen2_5OmniForConditionalGeneration`` in this process.

Inputs are built from the checkpoint's own parts -- its tokenizer and chat template, its image
processor (``Qwen2VLImageProcessor``) and feature extractor (``WhisperFeatureExtractor``) -- the way
``Qwen2_5OmniProcessor`` builds them: each ``<|IMAGE|>`` placeholder becomes one token per merged
vision patch, each ``<|AUDIO|>`` one token per audio-encoder frame.  Loading the parts instead of
the processor avoids the video processor, which needs torchvision although no video is ever sent.
``qwen_omni_utils`` is not needed either: its image resize and 16 kHz audio loading are done by
:mod:`omnistory_qwen25omni.media`.

Generation calls ``model.generate`` as the official runner does (``use_audio_in_video=False``, the
checkpoint's generation defaults, no speaker unless ``speaker`` is set) and takes the waveform it
returns at 24 kHz.  Everything torch-related is imported inside the methods.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import numpy as np

from omnistory_core.api import ComponentError, Media
from omnistory_qwen25omni.media import OUTPUT_SAMPLE_RATE, listening_copy, omni_utils_resize
from omnistory_qwen25omni.prompts import speak_messages
from omnistory_qwen25omni.replies import Reply, Speech

log = logging.getLogger("omnistory.qwen25omni")

#: placeholders of the Qwen2.5-Omni chat template (facts of the tokenizer) and the turn end
IMAGE_TOKEN = "<|IMAGE|>"
AUDIO_TOKEN = "<|AUDIO|>"
TURN_END = "<|im_end|>"
#: files that may hold the processor's chat template, in the order transformers reads them
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "processor_config.json")
#: the thinker temperature of the forced-speech fallback (the official runner's value)
FORCED_SPEECH_TEMPERATURE = 0.4


def audio_token_count(feature_frames: int) -> int:
    """Audio-encoder output frames for ``feature_frames`` mel frames (two stride-2 stages)."""
    after_conv = (feature_frames - 1) // 2 + 1
    return (after_conv - 2) // 2 + 1


def expand_placeholder(text: str, token: str, counts: list[int]) -> str:
    """Replace the i-th ``token`` in ``text`` by ``counts[i]`` copies of it."""
    pieces = text.split(token)
    if len(pieces) - 1 != len(counts):
        raise ComponentError(
            f"the chat template produced {len(pieces) - 1} {token} placeholder(s) for "
            f"{len(counts)} input(s)"
        )
    out = [pieces[0]]
    for count, piece in zip(counts, pieces[1:], strict=True):
        out.append(token * int(count))
        out.append(piece)
    return "".join(out)


def find_chat_template(model: str, revision: str | None, tokenizer: Any) -> str:
    """The checkpoint's (processor) chat template, else the tokenizer's."""
    import json

    from transformers.utils import cached_file

    for name in CHAT_TEMPLATE_FILES:
        try:
            path = cached_file(
                model,
                name,
                revision=revision,
                _raise_exceptions_for_missing_entries=False,
                _raise_exceptions_for_connection_errors=False,
            )
        except OSError:
            path = None
        if not path:
            continue
        with open(path, encoding="utf-8") as fh:
            content = fh.read()
        if name.endswith(".jinja"):
            return content
        template = json.loads(content).get("chat_template")
        if isinstance(template, str) and template.strip():
            return template
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, str) and template.strip():
        return template
    raise ComponentError(f"{model!r} has no chat template (processor or tokenizer)")


class InputBuilder:
    """Tokenizer + image processor + feature extractor + chat template -> model inputs."""

    def __init__(self, tokenizer: Any, image_processor: Any, feature_extractor: Any, template: str):
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.feature_extractor = feature_extractor
        self.template = template
        self.image_token = getattr(tokenizer, "image_token", None) or IMAGE_TOKEN
        self.audio_token = getattr(tokenizer, "audio_token", None) or AUDIO_TOKEN

    @classmethod
    def from_pretrained(cls, model: str, revision: str | None) -> InputBuilder:
        """The classes ``Qwen2_5OmniProcessor`` loads its parts with, from the same files (one
        ``preprocessor_config.json`` holds the image and the audio settings)."""
        from transformers import AutoTokenizer, Qwen2VLImageProcessor, WhisperFeatureExtractor

        kwargs = {"revision": revision} if revision else {}
        tokenizer = AutoTokenizer.from_pretrained(model, **kwargs)
        image_processor = Qwen2VLImageProcessor.from_pretrained(model, **kwargs)
        feature_extractor = WhisperFeatureExtractor.from_pretrained(model, **kwargs)
        return cls(
            tokenizer,
            image_processor,
            feature_extractor,
            find_chat_template(model, revision, tokenizer),
        )

    def render(self, messages: list[dict[str, Any]]) -> str:
        return self.tokenizer.apply_chat_template(
            messages, chat_template=self.template, tokenize=False, add_generation_prompt=True
        )

    def encode(
        self, messages: list[dict[str, Any]], image: Any = None, audio: np.ndarray | None = None
    ) -> dict[str, Any]:
        """Tensors for ``generate``: ``image`` is a PIL image for the image part, ``audio`` 16 kHz
        samples for the audio part (at most one of each, as the conversations use them)."""
        text = self.render(messages)
        features: dict[str, Any] = {}
        if image is not None:
            pixels = self.image_processor(images=[image], return_tensors="pt")
            grid = pixels["image_grid_thw"]
            merge = int(getattr(self.image_processor, "merge_size", 2))
            text = expand_placeholder(
                text, self.image_token, [int(g.prod()) // merge**2 for g in grid]
            )
            features["pixel_values"] = pixels["pixel_values"]
            features["image_grid_thw"] = grid
        else:
            text = expand_placeholder(text, self.image_token, [])
        if audio is not None:
            heard = self.feature_extractor(
                [audio],
                sampling_rate=int(self.feature_extractor.sampling_rate),
                padding="max_length",
                return_attention_mask=True,
                return_tensors="pt",
            )
            mask = heard["attention_mask"]
            text = expand_placeholder(
                text, self.audio_token, [audio_token_count(int(n)) for n in mask.sum(-1)]
            )
            features["input_features"] = heard["input_features"]
            features["feature_attention_mask"] = mask
        else:
            text = expand_placeholder(text, self.audio_token, [])
        encoded = self.tokenizer([text], return_tensors="pt", padding=True)
        return {
            "input_ids": encoded["input_ids"],
            "attention_mask": encoded["attention_mask"],
            **features,
        }


def force_tokens_processor(token_ids: list[int], end_id: int, prompt_len: int) -> Any:
    """A logits processor making the thinker emit exactly ``token_ids`` then ``end_id``."""
    import torch
    from transformers import LogitsProcessor

    class ForceLine(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            step = int(input_ids.shape[1]) - prompt_len
            target = token_ids[step] if step < len(token_ids) else end_id
            forced = torch.full_like(scores, float("-inf"))
            forced[:, target] = 0.0
            return forced

    return ForceLine()


def effective_attention(requested: str, device: str) -> str:
    """FlashAttention-2 (the official setting) needs a CUDA device and the flash-attn package;
    elsewhere the model runs with PyTorch's SDPA."""
    if requested != "flash_attention_2":
        return requested
    from transformers.utils import is_flash_attn_2_available

    if device.startswith("cuda") and is_flash_attn_2_available():
        return requested
    return "sdpa"


class TransformersRunner:
    """Loads the model and runs one conversation per call."""

    def __init__(self, settings: Any):
        self.s = settings
        self.model: Any = None
        self.inputs: InputBuilder | None = None
        self.device: str | None = None
        self.attention: str | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def load(self) -> None:
        import torch
        import transformers
        from packaging.version import Version
        from transformers import Qwen2_5OmniForConditionalGeneration

        from omnistory_core.kit.diffusion import resolve_device

        s = self.s
        device = resolve_device(s.device)
        attention = effective_attention(s.attn_implementation, device)
        if attention != s.attn_implementation:
            log.info(
                "backbone=qwen25omni: %s is not available on %s; using %s",
                s.attn_implementation,
                device,
                attention,
            )
        dtype: Any = "auto" if s.dtype == "auto" else getattr(torch, s.dtype)
        # transformers renamed torch_dtype to dtype in 4.56
        dtype_key = (
            "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"
        )
        kwargs: dict[str, Any] = {dtype_key: dtype, "attn_implementation": attention}
        if s.revision:
            kwargs["revision"] = s.revision
        if device.startswith("cuda"):
            kwargs["device_map"] = device
        try:
            model = Qwen2_5OmniForConditionalGeneration.from_pretrained(s.model, **kwargs)
            inputs = InputBuilder.from_pretrained(s.model, s.revision)
        except ComponentError:
            raise
        except Exception as exc:
            raise ComponentError(
                f"backbone=qwen25omni: cannot load {s.model!r}: {type(exc).__name__}: {exc}"
            ) from exc
        if not device.startswith("cuda"):
            model = model.to(device)
        model.eval()
        if s.speaker is not None and s.speaker not in getattr(model, "speaker_map", {}):
            known = ", ".join(sorted(getattr(model, "speaker_map", {}))) or "none"
            raise ComponentError(
                f"backbone=qwen25omni: speaker {s.speaker!r} is not in {s.model!r} (speakers: "
                f"{known})"
            )
        self.model, self.inputs, self.device, self.attention = model, inputs, device, attention

    def unload(self) -> None:
        self.model = None
        self.inputs = None
        from omnistory_core.kit.diffusion import release_cuda_memory

        release_cuda_memory()

    # -- calls ---------------------------------------------------------------------------------
    def chat(
        self,
        messages: list[dict[str, Any]],
        image: Media | None,
        speech: Speech | None,
        want_audio: bool,
        seed: int,
    ) -> Reply:
        picture = omni_utils_resize(image.open_image()) if image is not None else None
        heard = listening_copy(speech.samples, speech.sample_rate) if speech is not None else None
        inputs = self._tensors(self.inputs.encode(messages, image=picture, audio=heard))
        kwargs: dict[str, Any] = {**inputs, "use_audio_in_video": False}
        if self.s.thinker_max_new_tokens:
            kwargs["thinker_max_new_tokens"] = int(self.s.thinker_max_new_tokens)
        if want_audio:
            kwargs.update(self._audio_kwargs(inputs))
        else:
            kwargs.update(self._text_only_kwargs())
        return self._generate(kwargs, seed)

    def speak(self, quote: str, seed: int) -> Reply:
        """Forced speech: the thinker must say exactly ``quote`` and end its turn, so the talker
        voices that line and nothing else."""
        from transformers import LogitsProcessorList

        inputs = self._tensors(self.inputs.encode(speak_messages(quote)))
        tokenizer = self.inputs.tokenizer
        target = list(tokenizer.encode(quote, add_special_tokens=False))
        end_id = tokenizer.convert_tokens_to_ids(TURN_END)
        prompt_len = int(inputs["input_ids"].shape[1])
        kwargs: dict[str, Any] = {
            **inputs,
            "use_audio_in_video": False,
            "thinker_logits_processor": LogitsProcessorList(
                [force_tokens_processor(target, end_id, prompt_len)]
            ),
            "thinker_max_new_tokens": len(target) + 1,
            "temperature": FORCED_SPEECH_TEMPERATURE,
            **self._audio_kwargs(inputs),
        }
        return self._generate(kwargs, seed)

    # -- helpers -------------------------------------------------------------------------------
    def _tensors(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """On the model's device; floating inputs in the model's dtype (as ``.to(dtype)`` on the
        processor's BatchFeature does)."""
        dtype = self.model.dtype
        out = {}
        for key, value in inputs.items():
            value = value.to(self.model.device)
            out[key] = value.to(dtype) if value.is_floating_point() else value
        return out

    def _audio_kwargs(self, inputs: dict[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.s.speaker is not None:
            kwargs["speaker"] = self.s.speaker
        if self.s.talker_max_new_tokens:
            kwargs["talker_max_new_tokens"] = int(self.s.talker_max_new_tokens)
        talker = getattr(self.model, "talker", None)
        if "pixel_values" in inputs and talker is not None:
            accepted = set(inspect.signature(talker.forward).parameters)
            accepted |= set(inspect.signature(talker.prepare_inputs_for_generation).parameters)
            if "pixel_values" not in accepted:
                # generate() forwards every un-prefixed input to the talker too; the talker of
                # transformers 5.x rejects pixel_values (it only uses image_grid_thw): hand it None
                kwargs["talker_pixel_values"] = None
        return kwargs

    def _text_only_kwargs(self) -> dict[str, Any]:
        """No talker: ``return_audio=False`` (transformers 4.x) or ``generation_mode="text"``."""
        params = inspect.signature(self.model.generate).parameters
        if "return_audio" in params:
            return {"return_audio": False}
        return {"generation_mode": "text"}

    def _generate(self, kwargs: dict[str, Any], seed: int) -> Reply:
        import torch

        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
        prompt_len = int(kwargs["input_ids"].shape[1])
        with torch.inference_mode():
            output = self.model.generate(**kwargs)
        sequences, waveform = (
            (output[0], output[1]) if isinstance(output, tuple) else (output, None)
        )
        sequences = getattr(sequences, "sequences", sequences)
        new_ids = [int(t) for t in sequences[0, prompt_len:].tolist()]
        text = self.inputs.tokenizer.decode(
            new_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        ).strip()
        return Reply(
            text=text,
            speech=_speech(waveform),
            prompt_tokens=prompt_len,
            completion_tokens=len(new_ids),
            generated_ids=new_ids,
        )


def _speech(waveform: Any) -> Speech | None:
    if isinstance(waveform, list | tuple):
        waveform = waveform[0] if waveform else None
    if waveform is None:
        return None
    samples = waveform.detach().float().cpu().numpy().reshape(-1).astype(np.float32)
    if samples.size == 0:
        return None
    return Speech(samples=samples, sample_rate=OUTPUT_SAMPLE_RATE)
