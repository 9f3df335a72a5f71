"""OmniGen2 image experts, from a checkout of VectorSpaceLab/OmniGen2 (``image.source_dir``).

* ``image=omnigen2_refs`` is ViStoryBench's official adaptation (``IC/omnigen2``): per shot, the
  merged prompt plus the server's sentence ("The pictures are reference images of the
  characters", always appended, with no space), the first reference image of every onstage
  character (none: text to image), no previous shot; 1344x768, 50 steps, text/image guidance
  5.0/2.0 over the whole schedule, the client's negative list, ``max_sequence_length`` 1024,
  ``align_res`` off, the generator seeded with ``seed`` on the pipeline's device; images pass the
  official HTTP transport's JPEG q95 both ways.
* ``image=omnigen2`` edits the current image (the page on Omni-StoryBench, the shot's first
  onstage reference on ViStoryBench) with the same pipeline and settings.

The pipeline is loaded as the official server loads it: ``OmniGen2Pipeline.from_pretrained(model,
trust_remote_code=True)``, then its transformer ``OmniGen2Transformer2DModel.from_pretrained(model,
subfolder="transformer")``.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from omnistory_core.api import (
    CheckoutError,
    ComponentError,
    Failure,
    ImageExpert,
    Media,
    Param,
    ParamError,
)
from omnistory_core.kit.checkout import git_revision
from omnistory_core.kit.diffusion import (
    exception_failure,
    release_cuda_memory,
    resolve_device,
    resolve_dtype,
)
from omnistory_omnigen2.source import CHECKOUT, import_upstream

#: the environment OmniGen2's own requirements.txt pins (run it with image.runner.python)
REQUIREMENTS: tuple[str, ...] = (
    "torch==2.6.0",
    "torchvision==0.21.0",
    "transformers==4.51.3",
    "diffusers",
    "accelerate",
    "timm",
    "einops",
    "scipy",
    "opencv-python-headless",
    "omegaconf",
    "python-dotenv",
)
#: the sentence the official server appends to every prompt (no space before it)
REFERENCE_NOTE = "The pictures are reference images of the characters"
GENERATOR_DEVICES = ("pipeline", "cpu")


def jpeg_roundtrip(image: Any, quality: int | None) -> Any:
    """``image`` as JPEG at ``quality`` and back (unchanged for None)."""
    from PIL import Image

    rgb = image.convert("RGB")
    if quality is None:
        return rgb
    buffer = io.BytesIO()
    rgb.save(buffer, format="JPEG", quality=int(quality))
    buffer.seek(0)
    with Image.open(buffer) as decoded:
        return decoded.convert("RGB")


class OmniGen2(ImageExpert):
    """OmniGen2 on the current image (``image=omnigen2``)."""

    name = "omnigen2"
    version = "1"
    reads: ClassVar[tuple[str, ...]] = ("image_prompt", "current_image")
    description = "OmniGen2 (checkout of VectorSpaceLab/OmniGen2) edits the current image"
    requirements: ClassVar[tuple[str, ...]] = REQUIREMENTS
    parameters = (
        CHECKOUT.declaration(),
        Param("model", str, "OmniGen2/OmniGen2", "hub id or directory of the weights"),
        Param("steps", int, 50, "denoising steps", ge=1),
        Param("height", int, 768, "pixels", ge=16),
        Param("width", int, 1344, "pixels", ge=16),
        Param("text_guidance_scale", float, 5.0, "text guidance", ge=0),
        Param("image_guidance_scale", float, 2.0, "image guidance", ge=0),
        Param("cfg_range", list, [0.0, 1.0], "the part of the schedule guided, [start, end]"),
        Param("negative_prompt", str, "", "negative prompt"),
        Param("max_sequence_length", int, 1024, "prompt tokens", ge=1),
        Param("align_res", bool, False, "align the output size to the input image's"),
        Param("reference_note", bool, False, "append the official server's sentence"),
        Param(
            "jpeg_quality", (int, None), None, "JPEG round trip of inputs and output", ge=1, le=100
        ),
        Param("generator_device", str, "pipeline", "pipeline | cpu", choices=GENERATOR_DEVICES),
        Param("dtype", str, "auto", "auto: bfloat16 on a GPU, float32 on the CPU"),
        Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        cfg = self.params["cfg_range"]
        if len(cfg) != 2 or not all(isinstance(v, int | float) for v in cfg):
            raise ParamError(f"image={self.name}: cfg_range must be [start, end], got {cfg!r}")
        try:
            self.source_dir = CHECKOUT.check_dir(self.params["source_dir"])
        except CheckoutError as exc:
            raise ParamError(str(exc)) from None
        self.source_digest = CHECKOUT.digest(self.source_dir)
        self.source_revision = git_revision(self.source_dir)
        self.pipe: Any = None
        self.device: str | None = None

    def output_params(self) -> dict[str, Any]:
        # the checkout's code by content (its path differs between machines)
        return {**super().output_params(), "source_tree": self.source_digest}

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        p = self.params
        try:
            upstream = import_upstream(self.source_dir)
        except Exception as exc:
            raise ComponentError(
                f"{CHECKOUT.component}: cannot import OmniGen2's code from"
                f" image.source_dir={self.source_dir}: {type(exc).__name__}: {exc} -- run it in"
                " an environment with OmniGen2's requirements (image.runner.python=...); if the"
                f" checkout is incomplete, {CHECKOUT.get_it()}"
            ) from exc
        device = resolve_device(str(p["device"]))
        dtype = resolve_dtype(str(p["dtype"]), device)
        model = str(p["model"])
        try:
            pipe = upstream.OmniGen2Pipeline.from_pretrained(
                model, torch_dtype=dtype, trust_remote_code=True
            )
            pipe.transformer = upstream.OmniGen2Transformer2DModel.from_pretrained(
                model, subfolder="transformer", torch_dtype=dtype
            )
        except Exception as exc:
            raise ComponentError(
                f"image={self.name}: cannot load {model!r} with OmniGen2Pipeline:"
                f" {type(exc).__name__}: {exc}"
            ) from exc
        pipe = pipe.to(device)
        if hasattr(pipe, "set_progress_bar_config"):
            pipe.set_progress_bar_config(disable=True)
        self.pipe, self.device = pipe, device

    def unload(self) -> None:
        self.pipe = None
        release_cuda_memory()

    # -- calls -------------------------------------------------------------------------------
    def generate(self, prompt: str, images: Sequence[Any]) -> Any:
        """One pipeline call as the official server makes it; the PIL result."""
        import torch

        if self.pipe is None:
            self.load()
        p = self.params
        quality = p["jpeg_quality"]
        inputs = [jpeg_roundtrip(image, quality) for image in images]
        if p["reference_note"]:
            prompt += REFERENCE_NOTE
        where = "cpu" if p["generator_device"] == "cpu" else self.device
        start, end = (float(v) for v in p["cfg_range"])
        result = self.pipe(
            prompt=prompt,
            align_res=bool(p["align_res"]),
            input_images=inputs or None,
            width=int(p["width"]),
            height=int(p["height"]),
            num_inference_steps=int(p["steps"]),
            max_sequence_length=int(p["max_sequence_length"]),
            text_guidance_scale=float(p["text_guidance_scale"]),
            image_guidance_scale=float(p["image_guidance_scale"]),
            cfg_range=(start, end),
            negative_prompt=str(p["negative_prompt"]),
            num_images_per_prompt=1,
            generator=torch.Generator(where).manual_seed(int(p["seed"])),
            output_type="pil",
        )
        return jpeg_roundtrip(result.images[0], quality)

    def images_of(self, item: Mapping[str, Any]) -> list[Any]:
        page = item.get("current_image")
        return [page.open_image()] if isinstance(page, Media) else []

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        return [self.run_one(item) for item in items]

    def run_one(self, item: dict[str, Any]) -> Any:
        prompt = item.get("image_prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return Failure("unusable_image_prompt", "the image prompt is empty")
        try:
            return self.generate(prompt, self.images_of(item))
        except Exception as exc:  # one shot's failure
            if self.device and self.device.startswith("cuda"):
                release_cuda_memory()
            return exception_failure(exc)


class OmniGen2References(OmniGen2):
    """ViStoryBench's official OmniGen2 adaptation (``image=omnigen2_refs``): per shot, every
    onstage character's first reference image."""

    name = "omnigen2_refs"
    reads = ("image_prompt", "character_refs")
    description = (
        "OmniGen2 (checkout) per shot on the first reference of every onstage character,"
        " ViStoryBench's adaptation"
    )

    def images_of(self, item: Mapping[str, Any]) -> list[Any]:
        refs = item.get("character_refs") or []
        return [ref["images"][0].open_image() for ref in refs if ref.get("images")]


IMAGE_EXPERTS = (OmniGen2, OmniGen2References)

__all__ = ["IMAGE_EXPERTS", "REFERENCE_NOTE", "OmniGen2", "OmniGen2References"]
