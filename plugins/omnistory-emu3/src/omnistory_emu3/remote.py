"""Emu3 as the official runner loads it (``implementation=remote_code``).

The original checkpoints (``BAAI/Emu3-Chat``, ``BAAI/Emu3-Gen``) carry their modeling code
(``AutoModelForCausalLM`` with ``trust_remote_code=True``); images go through the separate
``BAAI/Emu3-VisionTokenizer`` (``AutoImageProcessor`` + ``AutoModel``, remote code too); the
processor that ties them together, ``emu3.mllm.processing_emu3.Emu3Processor``, exists only in the
upstream git repository, so ``source_dir`` must point at a checkout of it (see README).

Understanding: ``processor(text, image, mode="U", padding_image=True)`` then sampling.  Generation:
``processor(text, mode="G", ratio, image_area)`` for the prompt and the negative prompt,
``UnbatchedClassifierFreeGuidanceLogitsProcessor`` + ``PrefixConstrainedLogitsProcessor`` built
from ``processor.build_prefix_constrained_fn``, and ``processor.decode`` to the picture.
The official environment pins transformers 4.44.0 (README).  Imported only by ``load()``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from omnistory_core.api import ComponentError
from omnistory_emu3.runtime import describe_load_error, dtype_kwargs, sampling, seed_everything
from omnistory_emu3.settings import (
    PROCESSOR_MODULE,
    UPSTREAM_COMMIT,
    UPSTREAM_REPOSITORY,
    Emu3Settings,
)


def import_upstream_processor(source_dir: str) -> type:
    """``Emu3Processor`` from a checkout of the upstream repository (put first on ``sys.path``)."""
    root = Path(source_dir).expanduser().resolve()
    if not (root / PROCESSOR_MODULE).is_file():
        raise ComponentError(
            f"backbone=emu3: source_dir={source_dir!r} has no {PROCESSOR_MODULE}; get it with "
            f"`git clone {UPSTREAM_REPOSITORY} && git -C Emu3 checkout {UPSTREAM_COMMIT}` and "
            "point source_dir (or OMNISTORY_SOURCE_BACKBONE_EMU3) at the Emu3 directory"
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        from emu3.mllm.processing_emu3 import Emu3Processor
    except Exception as exc:
        raise ComponentError(
            f"backbone=emu3: cannot import Emu3Processor from {root}: {type(exc).__name__}: {exc}"
        ) from exc
    module_file = Path(sys.modules[Emu3Processor.__module__].__file__ or "").resolve()
    if root not in module_file.parents:
        raise ComponentError(
            f"backbone=emu3: emu3.mllm.processing_emu3 was already imported from {module_file}, "
            f"not from source_dir={root}"
        )
    return Emu3Processor


class RemoteCodeEmu3:
    """Emu3-Chat, Emu3-Gen and the vision tokenizer through their checkpoints' own code."""

    def __init__(self, settings: Emu3Settings, device: str, dtype: torch.dtype):
        from transformers import AutoImageProcessor, AutoModel

        self.settings = settings
        self.device = device
        self.dtype = dtype
        processor_class = import_upstream_processor(settings.source_dir or "")
        vq_extra = {"revision": settings.vq_revision} if settings.vq_revision else {}
        try:
            image_processor = AutoImageProcessor.from_pretrained(
                settings.vq_model, trust_remote_code=True, **vq_extra
            )
            # one vision tokenizer serves both processors (the official runner loads two copies
            # of the same frozen weights)
            vision_tokenizer = (
                AutoModel.from_pretrained(settings.vq_model, trust_remote_code=True, **vq_extra)
                .to(device)
                .eval()
            )
        except Exception as exc:
            raise ComponentError(
                f"backbone=emu3: cannot load vq_model={settings.vq_model!r}: "
                f"{describe_load_error(exc)}"
            ) from exc
        self.chat_model, self.chat_processor = self._load(
            "chat_model", settings.chat_model, settings.chat_revision,
            processor_class, image_processor, vision_tokenizer,
        )  # fmt: skip
        self.gen_model, self.gen_processor = self._load(
            "gen_model", settings.gen_model, settings.gen_revision,
            processor_class, image_processor, vision_tokenizer,
        )  # fmt: skip

    def _load(
        self, key: str, checkpoint: str, revision: str | None, processor_class: type,
        image_processor: Any, vision_tokenizer: Any,
    ) -> tuple[Any, Any]:  # fmt: skip
        from transformers import AutoModelForCausalLM, AutoTokenizer

        extra: dict[str, Any] = {"revision": revision} if revision else {}
        kwargs = {**extra, **dtype_kwargs(self.dtype), "trust_remote_code": True}
        if self.settings.attn_implementation:
            kwargs["attn_implementation"] = self.settings.attn_implementation
        try:
            model = AutoModelForCausalLM.from_pretrained(checkpoint, **kwargs).to(self.device)
            tokenizer = AutoTokenizer.from_pretrained(
                checkpoint, trust_remote_code=True, padding_side="left", **extra
            )
        except Exception as exc:
            raise ComponentError(
                f"backbone=emu3: cannot load {key}={checkpoint!r} (remote code): "
                f"{describe_load_error(exc)}"
            ) from exc
        return model.eval(), processor_class(image_processor, vision_tokenizer, tokenizer)

    # -- understanding ---------------------------------------------------------------------
    @torch.no_grad()
    def understand(self, image: Image.Image, request: str, seed: int) -> tuple[str, dict]:
        from transformers import GenerationConfig

        s, processor, model = self.settings, self.chat_processor, self.chat_model
        tokenizer = processor.tokenizer
        inputs = processor(
            text=[request],
            image=[image],
            mode="U",
            padding_image=True,
            padding="longest",
            return_tensors="pt",
        )
        config = GenerationConfig(
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            max_new_tokens=s.chat_max_new_tokens,
            repetition_penalty=s.chat_repetition_penalty,
            **sampling(s.chat_do_sample, s.chat_temperature, s.chat_top_p, s.chat_top_k),
        )
        seed_everything(seed)
        output = model.generate(
            inputs.input_ids.to(self.device),
            generation_config=config,
            attention_mask=inputs.attention_mask.to(self.device),
        )
        prompt_length = inputs.input_ids.shape[-1]
        new_tokens = output[:, prompt_length:]
        decoded = processor.batch_decode(new_tokens, skip_special_tokens=True)[0]
        if isinstance(decoded, list):  # text interleaved with decoded images: keep the text
            decoded = "".join(part for part in decoded if isinstance(part, str))
        usage = {
            "chat_prompt_tokens": int(prompt_length),
            "chat_new_tokens": int(new_tokens.shape[1]),
        }
        return decoded, usage

    # -- image generation ------------------------------------------------------------------
    def image_area(self) -> int:
        if self.settings.image_area is not None:
            return self.settings.image_area
        area = getattr(self.gen_model.config, "image_area", None)
        if not isinstance(area, int) or area <= 0:
            raise ComponentError(
                f"backbone=emu3: gen_model={self.settings.gen_model!r} has no image_area in its "
                "config; set image_area"
            )
        return area

    @torch.no_grad()
    def generate_image(self, prompt: str, seed: int) -> tuple[Image.Image, dict]:
        from transformers import GenerationConfig
        from transformers.generation import (
            LogitsProcessorList,
            PrefixConstrainedLogitsProcessor,
            UnbatchedClassifierFreeGuidanceLogitsProcessor,
        )

        s, processor, model = self.settings, self.gen_processor, self.gen_model
        area = self.image_area()
        header: dict[str, Any] = {
            "mode": "G",
            "ratio": [s.ratio],
            "image_area": area,
            "return_tensors": "pt",
            "padding": "longest",
        }
        positive = processor(text=[prompt], **header)
        negative = processor(text=[s.negative_prompt], **header)
        config = GenerationConfig(
            use_cache=True,
            eos_token_id=model.config.eos_token_id,
            pad_token_id=model.config.pad_token_id,
            max_new_tokens=s.gen_max_new_tokens,
            repetition_penalty=1.0,
            **sampling(s.gen_do_sample, 1.0, 1.0, s.gen_top_k),
        )
        height, width = positive.image_size[:, 0], positive.image_size[:, 1]
        processors = LogitsProcessorList(
            [
                UnbatchedClassifierFreeGuidanceLogitsProcessor(
                    s.guidance_scale,
                    model,
                    unconditional_ids=negative.input_ids.to(self.device),
                ),
                PrefixConstrainedLogitsProcessor(
                    processor.build_prefix_constrained_fn(height, width), num_beams=1
                ),
            ]
        )
        seed_everything(seed)
        output = model.generate(
            positive.input_ids.to(self.device),
            generation_config=config,
            logits_processor=processors,
            attention_mask=positive.attention_mask.to(self.device),
        )
        for sequence in output:
            parts = processor.decode(sequence)
            for part in parts if isinstance(parts, list) else [parts]:
                if isinstance(part, Image.Image):
                    usage = {
                        "gen_prompt_tokens": int(positive.input_ids.shape[-1]),
                        "gen_new_tokens": int(output.shape[-1] - positive.input_ids.shape[-1]),
                        "image_tokens": [int(height[0]), int(width[0])],
                        "image_area": area,
                    }
                    return part.convert("RGB"), usage
        raise ComponentError("Emu3-Gen output decoded to no image")
