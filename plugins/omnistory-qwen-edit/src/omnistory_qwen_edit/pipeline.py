"""Loading and calling diffusers' ``QwenImageEditPlusPipeline`` (torch imported inside functions).

The processor is built from the checkpoint's parts (``processor/``: the ``Qwen2VLImageProcessor``
and the tokenizer) rather than loaded as ``Qwen2VLProcessor``: transformers builds that class's
video processor too, which needs torchvision although no video is ever sent.  The subclass below
keeps ``Qwen2VLProcessor``'s own call (image placeholders expanded per merged patch, the same
tensors), only its construction differs.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: what the official ViStoryBench server appends to the prompt when the request has images
#: (``IC/QwenImageEdit2509/api_server.py``): the previous shot is last, or there is none
NOTE_WITH_PREVIOUS = (
    " The first few pictures are reference images of the characters, and the last picture is"
    " the result of the previous shot, which is used for reference."
)
NOTE_CHARACTERS_ONLY = " The pictures are reference images of the characters."


@dataclass(frozen=True)
class CallSettings:
    """One pipeline call's settings (the expert's parameters, resolved)."""

    steps: int
    true_cfg_scale: float
    negative_prompt: str | None
    height: int | None
    width: int | None
    guidance_scale: float | None


def parts_processor(model: str, revision: str | None = None) -> Any:
    """``Qwen2VLProcessor`` from the checkpoint's ``processor/`` parts (no video processor)."""
    from transformers import AutoTokenizer, Qwen2VLImageProcessor, Qwen2VLProcessor

    kwargs: dict[str, Any] = {"subfolder": "processor"}
    if revision:
        kwargs["revision"] = revision
    image_processor = Qwen2VLImageProcessor.from_pretrained(model, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(model, **kwargs)

    class ImageTextProcessor(Qwen2VLProcessor):
        """``Qwen2VLProcessor`` for images and text only (no video processor to build)."""

        def __init__(self, image_processor: Any, tokenizer: Any) -> None:
            # ProcessorMixin.__init__ checks every part's class, the video processor's included;
            # set what Qwen2VLProcessor.__init__ sets, minus that check
            self.chat_template = None
            self.image_processor = image_processor
            self.tokenizer = tokenizer
            self.video_processor = None
            self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
            self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
            self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
            self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)

    return ImageTextProcessor(image_processor, tokenizer)


def load_pipeline(
    model: str,
    *,
    revision: str | None,
    dtype: Any,
    device: str,
    lora: str | None = None,
    lora_weight_name: str | None = None,
    lora_scale: float = 1.0,
) -> Any:
    """The pipeline from ``model`` (hub id or directory), with the LoRA ``lora`` fused in at
    ``lora_scale`` when given, on ``device``."""
    from diffusers import QwenImageEditPlusPipeline

    kwargs: dict[str, Any] = {"dtype": dtype, "processor": parts_processor(model, revision)}
    if revision:
        kwargs["revision"] = revision
    pipe = QwenImageEditPlusPipeline.from_pretrained(model, **kwargs)
    if lora:
        extra = {"weight_name": lora_weight_name} if lora_weight_name else {}
        pipe.load_lora_weights(lora, adapter_name="lora", **extra)
        pipe.set_adapters(["lora"], adapter_weights=[float(lora_scale)])
    pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def jpeg_roundtrip(image: Any, quality: int | None) -> Any:
    """``image`` (PIL) encoded as JPEG at ``quality`` and decoded again (the official HTTP
    transport's compression); unchanged for None."""
    from PIL import Image

    rgb = image.convert("RGB")
    if quality is None:
        return rgb
    buffer = io.BytesIO()
    rgb.save(buffer, format="JPEG", quality=int(quality))
    buffer.seek(0)
    with Image.open(buffer) as decoded:
        return decoded.convert("RGB")


def edit(
    pipe: Any,
    prompt: str,
    images: Sequence[Any],
    settings: CallSettings,
    generator: Any,
) -> Any:
    """One pipeline call: ``images`` (PIL, in order) edited by ``prompt``; the PIL result."""
    import torch

    kwargs: dict[str, Any] = {
        "image": list(images),
        "prompt": prompt,
        "true_cfg_scale": settings.true_cfg_scale,
        "num_inference_steps": settings.steps,
        "num_images_per_prompt": 1,
        "generator": generator,
        "output_type": "pil",
    }
    if settings.negative_prompt is not None:
        kwargs["negative_prompt"] = settings.negative_prompt
    if settings.height is not None and settings.width is not None:
        kwargs["height"], kwargs["width"] = settings.height, settings.width
    if settings.guidance_scale is not None:
        kwargs["guidance_scale"] = settings.guidance_scale
    with torch.inference_mode():
        output = pipe(**kwargs)
    return output.images[0]


__all__ = [
    "NOTE_CHARACTERS_ONLY",
    "NOTE_WITH_PREVIOUS",
    "CallSettings",
    "edit",
    "jpeg_roundtrip",
    "load_pipeline",
    "parts_processor",
]
