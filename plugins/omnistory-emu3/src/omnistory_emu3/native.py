"""Emu3 through transformers' own classes (``implementation=native``).

``Emu3ForConditionalGeneration`` + ``Emu3Processor`` (tokenizer + ``Emu3ImageProcessor``), one
pair per checkpoint (Chat for understanding, Gen for images); the VQ-VAE (``Emu3VQVAE``) lives
inside each checkpoint.  Understanding follows the model card: the chat template with Emu3's system
text, the current page as ``<image>``, sampling.  Image generation follows transformers' Emu3
documentation: the processor's ``return_for_image_generation`` header, prefix-constrained decoding
over the visual vocabulary, classifier-free guidance from a negative prompt, and
``decode_image_tokens`` + ``postprocess``.  Imported only by ``load()``.
"""

from __future__ import annotations

from typing import Any

import torch
from PIL import Image

from omnistory_core.api import ComponentError
from omnistory_emu3.layout import check_layout, image_sequence_length, next_token_kind
from omnistory_emu3.prompting import EMU3_SYSTEM_TEXT, upstream_chat_layout
from omnistory_emu3.runtime import describe_load_error, dtype_kwargs, sampling, seed_everything
from omnistory_emu3.settings import Emu3Settings

#: Emu3's end-of-line token (a reserved token of its vocabulary; the modeling code looks it up
#: by this name in ``vocabulary_map``)
EOL_TOKEN = "<|extra_200|>"
#: Emu3Processor's default generation area (720 x 720 px)
DEFAULT_IMAGE_AREA = 518400


class NativeEmu3:
    """Emu3-Chat and Emu3-Gen loaded with ``Emu3ForConditionalGeneration``."""

    def __init__(self, settings: Emu3Settings, device: str, dtype: torch.dtype):
        self.settings = settings
        self.device = device
        self.dtype = dtype
        self.chat_model, self.chat_processor = self._load(
            "chat_model", settings.chat_model, settings.chat_revision
        )
        self.gen_model, self.gen_processor = self._load(
            "gen_model", settings.gen_model, settings.gen_revision
        )

    def _load(self, key: str, checkpoint: str, revision: str | None) -> tuple[Any, Any]:
        from transformers import Emu3ForConditionalGeneration, Emu3Processor

        extra: dict[str, Any] = {"revision": revision} if revision else {}
        try:
            processor = Emu3Processor.from_pretrained(checkpoint, **extra)
            kwargs = {**extra, **dtype_kwargs(self.dtype)}
            if self.settings.attn_implementation:
                kwargs["attn_implementation"] = self.settings.attn_implementation
            model = Emu3ForConditionalGeneration.from_pretrained(checkpoint, **kwargs)
        except Exception as exc:
            raise ComponentError(
                f"backbone=emu3: cannot load {key}={checkpoint!r} with transformers' Emu3 "
                f"classes: {describe_load_error(exc)}"
            ) from exc
        processor.tokenizer.padding_side = "left"
        return model.to(self.device).eval(), processor

    # -- understanding ---------------------------------------------------------------------
    def chat_text(self, request: str) -> str:
        """The full prompt: the checkpoint's chat template (Emu3's system text, then the user
        turn with the image first), or the upstream layout if the checkpoint has none."""
        processor = self.chat_processor
        if getattr(processor, "chat_template", None):
            conversation = [
                {"role": "system", "content": [{"type": "text", "text": EMU3_SYSTEM_TEXT}]},
                {
                    "role": "user",
                    "content": [{"type": "image"}, {"type": "text", "text": request}],
                },
            ]
            return processor.apply_chat_template(conversation, add_generation_prompt=True)
        return upstream_chat_layout(processor.image_token, request)

    def chat_inputs(self, image: Image.Image, request: str) -> Any:
        """The model inputs of one understanding call (token ids, pixels, image sizes)."""
        inputs = self.chat_processor(
            images=[image], text=[self.chat_text(request)], return_tensors="pt"
        ).to(self.device)
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        return inputs

    @torch.no_grad()
    def understand(self, image: Image.Image, request: str, seed: int) -> tuple[str, dict]:
        from transformers import GenerationConfig

        s, model, tokenizer = self.settings, self.chat_model, self.chat_processor.tokenizer
        inputs = self.chat_inputs(image, request)
        config = GenerationConfig(
            max_new_tokens=s.chat_max_new_tokens,
            # every knob explicit: unset ones would be filled from the checkpoint's own
            # generation_config
            **sampling(s.chat_do_sample, s.chat_temperature, s.chat_top_p, s.chat_top_k),
            repetition_penalty=s.chat_repetition_penalty,
            guidance_scale=1.0,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        seed_everything(seed)
        output = model.generate(**inputs, generation_config=config)
        prompt_length = inputs["input_ids"].shape[1]
        new_tokens = output[:, prompt_length:]
        text = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)[0]
        usage = {
            "chat_prompt_tokens": int(prompt_length),
            "chat_new_tokens": int(new_tokens.shape[1]),
        }
        return text, usage

    # -- image generation ------------------------------------------------------------------
    def image_area(self) -> int:
        """The configured area, else the Gen checkpoint's ``image_area``, else the processor's."""
        if self.settings.image_area is not None:
            return self.settings.image_area
        area = getattr(self.gen_model.config, "image_area", None)
        if isinstance(area, int) and area > 0:
            return area
        # a class attribute of Emu3Processor in recent transformers, a kwargs default before
        return int(getattr(self.gen_processor, "image_area", DEFAULT_IMAGE_AREA))

    def _token_kinds(self) -> dict[str, Any]:
        tokenizer = self.gen_processor.tokenizer
        mapping = self.gen_model.vocabulary_mapping
        eol = mapping.eol_token_id
        if eol is None:
            eol = tokenizer.convert_tokens_to_ids(EOL_TOKEN)
        return {
            "visual": list(mapping.image_tokens),
            "eol": [eol],
            "eof": [tokenizer.convert_tokens_to_ids(self.gen_processor.eof_token)],
            "eoi": [tokenizer.convert_tokens_to_ids(self.gen_processor.image_end_token)],
            "eos": [tokenizer.eos_token_id],
            "pad": [tokenizer.pad_token_id],
        }

    @torch.no_grad()
    def generate_image(self, prompt: str, seed: int) -> tuple[Image.Image, dict]:
        from transformers import GenerationConfig

        s, processor, model = self.settings, self.gen_processor, self.gen_model
        area = self.image_area()
        header = {"return_for_image_generation": True, "ratio": s.ratio, "image_area": area}
        positive = processor(text=[prompt], return_tensors="pt", **header)
        # the negative prompt carries the same image header, as upstream Emu3 builds it
        negative = processor(text=[s.negative_prompt], return_tensors="pt", **header)
        height, width = (int(v) for v in positive.pop("image_sizes")[0])
        negative.pop("image_sizes", None)
        needed = image_sequence_length(height, width)
        if s.gen_max_new_tokens < needed:
            raise ComponentError(
                f"gen_max_new_tokens={s.gen_max_new_tokens} cannot hold a {height}x{width}-token "
                f"image ({needed} tokens; ratio {s.ratio}, image_area {area})"
            )
        kinds = self._token_kinds()
        prompt_length = positive["input_ids"].shape[1]

        def allowed(batch_id: int, input_ids: torch.Tensor) -> list[int]:
            # the header's last token is the prompt's last token: offset 1 = first new token
            offset = input_ids.shape[0] - prompt_length + 1
            return kinds[next_token_kind(offset, height, width)]

        config = GenerationConfig(
            max_new_tokens=s.gen_max_new_tokens,
            # the official call leaves temperature and top_p at 1.0
            **sampling(s.gen_do_sample, 1.0, 1.0, s.gen_top_k),
            repetition_penalty=1.0,
            guidance_scale=s.guidance_scale,
            use_cache=True,
            eos_token_id=processor.tokenizer.eos_token_id,
            pad_token_id=processor.tokenizer.pad_token_id,
        )
        positive, negative = positive.to(self.device), negative.to(self.device)
        seed_everything(seed)
        output = model.generate(
            input_ids=positive["input_ids"],
            attention_mask=positive["attention_mask"],
            generation_config=config,
            prefix_allowed_tokens_fn=allowed,
            negative_prompt_ids=negative["input_ids"],
            negative_prompt_attention_mask=negative["attention_mask"],
        )
        new_tokens = output[0, prompt_length:].tolist()
        by_id = {i: kind for kind, ids in kinds.items() for i in ids}
        problem = check_layout([by_id.get(t, "other") for t in new_tokens], height, width)
        if problem is not None:
            raise ComponentError(f"Emu3-Gen produced no whole image: {problem}")
        image_tokens = output[:, prompt_length : prompt_length + needed]
        pixels = model.decode_image_tokens(image_tokens=image_tokens, height=height, width=width)
        if not torch.isfinite(pixels).all():
            raise ComponentError("non-finite pixel values in the decoded image", "empty_output")
        images = processor.postprocess(list(pixels.float()), return_tensors="PIL.Image.Image")
        picture = images["pixel_values"][0]
        usage = {
            "gen_prompt_tokens": int(prompt_length),
            "gen_new_tokens": len(new_tokens),
            "image_tokens": [height, width],
            "image_area": area,
        }
        return picture.convert("RGB"), usage
