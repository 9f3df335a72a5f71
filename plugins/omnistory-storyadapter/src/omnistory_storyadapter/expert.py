"""Story-Adapter on ViStoryBench (``image=storyadapter``), one call per story, from a checkout of
UCSC-VLAA/story-adapter (``image.source_dir``).

As ViStoryBench's script runs it (``DP/adapt2storyadapter.py`` + ``IC/storyadapter/
run_custom.py``): diffusers' ``StableDiffusionXLPipeline`` (RealVisXL V4.0) with a DDIM
scheduler (1000 steps, betas 0.00085-0.012 scaled_linear, no clipping, ``set_alpha_to_one``
off, ``steps_offset`` 1), wrapped by ``StoryAdapterXL`` with the IP-Adapter SDXL image encoder
and weights; the merged prompt of each shot (with the upstream example's leftover name
substitutions, ``Robinson`` and ``Friday``); style ``comic``, 50 steps, seed 42 for every call.

* Round 0: each shot from its text, with the first reference image of every onstage character
  as the image prompt at scale 0.3 (``mode=img_ref``; none onstage, or ``mode=text_only``: text
  alone).
* ``rounds`` refinement rounds at scales ``linspace(0.3, 0.5, rounds)``: every shot again, with
  all of the previous round's story images (resized to 256x256) as its image prompt.

A shot's image is its last round's: ``rounds=0`` is the published ``*_Scale0`` rows
(``results_xl``), ``rounds=5`` the ``*_Scale5`` rows (``results_xl5``).  A shot that fails in a
round is that shot's failure, and later rounds go on without its image.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from omnistory_core.api import (
    CheckoutError,
    ComponentError,
    Failure,
    ImageExpert,
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
from omnistory_storyadapter.source import CHECKOUT, import_story_adapter

#: story-adapter's requirements.txt
REQUIREMENTS: tuple[str, ...] = (
    "torch==2.2.2",
    "torchvision==0.17.2",
    "diffusers==0.27.2",
    "transformers==4.39.0",
    "huggingface_hub==0.25.2",
    "einops==0.7.0",
    "safetensors==0.4.1",
    "Pillow==10.1.0",
    "numpy==1.23.2",
)
MODES = ("img_ref", "text_only")
STYLES = ("comic", "film", "realistic")
#: the upstream example's character substitutions, still applied by ViStoryBench's script
EXAMPLE_SUBSTITUTIONS: tuple[tuple[str, str], ...] = (
    ("Robinson", "a man, wearing tattered sailor clothes."),
    ("Friday", "a chimpanzee."),
)
#: the size the previous round's images are given at
REFINE_SIZE = (256, 256)


def refinement_scales(rounds: int, start: float, end: float) -> list[float]:
    """``numpy.linspace(start, end, rounds)`` without numpy."""
    if rounds == 1:
        return [start]
    return [start + (end - start) * i / (rounds - 1) for i in range(rounds)]


def fix_prompt(prompt: str) -> str:
    """The leftover substitutions of ViStoryBench's script, in its order."""
    for name, replacement in EXAMPLE_SUBSTITUTIONS:
        if name in prompt:
            prompt = prompt.replace(name, replacement)
    return prompt


class StoryAdapter(ImageExpert):
    """Story-Adapter (SDXL + IP-Adapter, iterative refinement over the whole story)."""

    name = "storyadapter"
    version = "1"
    unit = "group"
    reads: ClassVar[tuple[str, ...]] = ("image_prompt", "character_refs")
    description = (
        "Story-Adapter (checkout of UCSC-VLAA/story-adapter): SDXL + IP-Adapter, each round"
        " conditioned on the whole story's previous images, one call per story"
    )
    requirements: ClassVar[tuple[str, ...]] = REQUIREMENTS
    parameters = (
        CHECKOUT.declaration(),
        Param("model", str, "SG161222/RealVisXL_V4.0", "SDXL hub id or directory"),
        Param("image_encoder", str, "h94/IP-Adapter", "IP-Adapter SDXL image encoder directory"),
        Param("ip_ckpt", str, "ip-adapter_sdxl.bin", "IP-Adapter SDXL weights file"),
        Param(
            "mode", str, "img_ref", "img_ref | text_only (round 0's image prompt)", choices=MODES
        ),
        Param("rounds", int, 5, "refinement rounds after round 0", ge=0),
        Param("first_scale", float, 0.3, "round 0's image-prompt scale", ge=0),
        Param("scale_start", float, 0.3, "the first refinement round's scale", ge=0),
        Param("scale_end", float, 0.5, "the last refinement round's scale", ge=0),
        Param("style", str, "comic", "the prompt wrapper upstream applies", choices=STYLES),
        Param("steps", int, 50, "denoising steps", ge=1),
        Param("example_substitutions", bool, True, "the script's Robinson/Friday replacements"),
        Param("dtype", str, "auto", "auto: float16 on a GPU (the script's), float32 on the CPU"),
        Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        try:
            self.source_dir = CHECKOUT.check_dir(self.params["source_dir"])
        except CheckoutError as exc:
            raise ParamError(str(exc)) from None
        self.source_digest = CHECKOUT.digest(self.source_dir)
        self.source_revision = git_revision(self.source_dir)
        self.adapter: Any = None
        self.device: str | None = None

    def output_params(self) -> dict[str, Any]:
        return {**super().output_params(), "source_tree": self.source_digest}

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        import torch
        from diffusers import DDIMScheduler, StableDiffusionXLPipeline

        p = self.params
        try:
            story_adapter = import_story_adapter(self.source_dir)
        except Exception as exc:
            raise ComponentError(
                f"{CHECKOUT.component}: cannot import story-adapter's code from"
                f" image.source_dir={self.source_dir}: {type(exc).__name__}: {exc} -- run it in"
                " an environment with story-adapter's requirements (image.runner.python=...); if"
                f" the checkout is incomplete, {CHECKOUT.get_it()}"
            ) from exc
        device = resolve_device(str(p["device"]))
        dtype = (
            torch.float16
            if p["dtype"] == "auto" and device != "cpu"
            else resolve_dtype(str(p["dtype"]), device)
        )
        scheduler = DDIMScheduler(
            num_train_timesteps=1000,
            beta_start=0.00085,
            beta_end=0.012,
            beta_schedule="scaled_linear",
            clip_sample=False,
            set_alpha_to_one=False,
            steps_offset=1,
        )
        try:
            pipe = StableDiffusionXLPipeline.from_pretrained(
                str(p["model"]), torch_dtype=dtype, scheduler=scheduler
            )
            pipe.set_progress_bar_config(disable=True)
            self.adapter = story_adapter(pipe, str(p["image_encoder"]), str(p["ip_ckpt"]), device)
        except Exception as exc:
            raise ComponentError(
                f"image={self.name}: cannot build StoryAdapterXL on {p['model']!r}:"
                f" {type(exc).__name__}: {exc}"
            ) from exc
        self.device = device

    def unload(self) -> None:
        self.adapter = None
        release_cuda_memory()

    # -- a story -----------------------------------------------------------------------------
    def generate(self, prompt: str, images: list[Any] | None, scale: float) -> Any:
        p = self.params
        out = self.adapter.generate(
            pil_image=images or None,
            num_samples=1,
            num_inference_steps=int(p["steps"]),
            seed=int(p["seed"]),
            prompt=prompt,
            scale=scale,
            use_image=bool(images),
            style=str(p["style"]),
        )
        return out[0]

    def references(self, shot: Mapping[str, Any]) -> list[Any]:
        if self.params["mode"] == "text_only":
            return []
        from PIL import Image

        out = []
        for ref in shot.get("character_refs") or []:
            if ref.get("images"):
                with Image.open(ref["images"][0].path) as image:
                    image.load()
                    out.append(image.copy())
        return out

    def run_one(self, item: dict[str, Any]) -> list[Any]:
        """``item`` is the story: ``{"items": [each shot's inputs, in story order]}``."""
        if self.adapter is None:
            self.load()
        p = self.params
        shots = item["items"]
        prompts: list[str | None] = []
        outputs: list[Any] = []
        for shot in shots:
            prompt = shot.get("image_prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                prompts.append(None)
                outputs.append(Failure("unusable_image_prompt", "the image prompt is empty"))
                continue
            prompts.append(fix_prompt(prompt) if p["example_substitutions"] else prompt)
            outputs.append(None)
        for index, (shot, prompt) in enumerate(zip(shots, prompts, strict=True)):
            if prompt is None:
                continue
            try:
                outputs[index] = self.generate(
                    prompt, self.references(shot), float(p["first_scale"])
                )
            except Exception as exc:
                outputs[index] = exception_failure(exc)
        scales = refinement_scales(int(p["rounds"]), float(p["scale_start"]), float(p["scale_end"]))
        for scale in scales if p["rounds"] else []:
            story = [o.resize(REFINE_SIZE) for o in outputs if not isinstance(o, Failure)]
            for index, prompt in enumerate(prompts):
                if prompt is None or isinstance(outputs[index], Failure):
                    continue
                try:
                    outputs[index] = self.generate(prompt, story, scale)
                except Exception as exc:  # this shot fails; later rounds go on without it
                    outputs[index] = exception_failure(exc)
        return outputs


IMAGE_EXPERTS = (StoryAdapter,)

__all__ = ["IMAGE_EXPERTS", "StoryAdapter", "fix_prompt", "refinement_scales"]
