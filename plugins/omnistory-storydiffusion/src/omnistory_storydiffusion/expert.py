"""StoryDiffusion's original mode on ViStoryBench (``image=storydiffusion``), one call per story.

As ViStoryBench ran it (``DP/adapt2storydiffusion.py`` + the StoryDiffusion app,
``IC/storydiffusion/..._custom.py``): diffusers' ``StableDiffusionXLPipeline`` with a DDIM
scheduler, FreeU (s1 0.6, s2 0.4, b1 1.1, b2 1.2) and consistent self-attention
(:mod:`omnistory_storydiffusion.attention`) in the up blocks; the story's shot lines and general
prompt built as the adapter builds them (:mod:`omnistory_storydiffusion.prompts`); each
character's ID shot drawn first, writing its bank, then every other shot in story order reading
the banks of its characters; every shot from a generator seeded with ``seed`` (42 in the preset);
prompts of any length through :mod:`omnistory_storydiffusion.long_prompt`.

Departures (README): a character that never appears alone has no ID shot and no bank (the app
stops the story); a story whose first shot has nobody onstage is drawn (the app refuses it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from omnistory_core.api import ComponentError, Failure, ImageExpert, Param
from omnistory_core.kit.diffusion import (
    exception_failure,
    release_cuda_memory,
    resolve_device,
    resolve_dtype,
)
from omnistory_storydiffusion.attention import StoryBank, install
from omnistory_storydiffusion.long_prompt import encode_sdxl
from omnistory_storydiffusion.prompts import StoryPlan, general_prompt, plan_story, shot_line

REQUIREMENTS: tuple[str, ...] = (
    "torch>=2.5",
    "diffusers>=0.42.1,<0.43",
    "transformers>=5.0,<6",
    "accelerate>=1.0",
    "safetensors>=0.4",
)
#: the adapter's fixed negative prompt (DP/adapt2storydiffusion.py)
NEGATIVE_PROMPT = (
    "bad anatomy, bad hands, missing fingers, extra fingers, three hands, three legs, bad arms,"
    " missing legs, missing arms, poorly drawn face, bad face, fused face, cloned face, three"
    " crus, fused feet, fused thigh, extra crus, ugly fingers, horn, cartoon, cg, 3d, unreal,"
    " animate, amputation, disconnected limbs"
)
FREEU = {"s1": 0.6, "s2": 0.4, "b1": 1.1, "b2": 1.2}
MISSING_ID = ("none", "fail")


class StoryDiffusion(ImageExpert):
    """StoryDiffusion (SDXL + consistent self-attention), the app's original mode."""

    name = "storydiffusion"
    version = "1"
    unit = "group"
    reads: ClassVar[tuple[str, ...]] = ("shot", "characters")
    description = (
        "StoryDiffusion original mode: SDXL with consistent self-attention across the shots of a"
        " story, one call per story"
    )
    requirements: ClassVar[tuple[str, ...]] = REQUIREMENTS
    parameters = (
        Param("model", str, "stablediffusionapi/sdxl-unstable-diffusers-y", "SDXL hub id or dir"),
        Param("revision", str, None, "hub revision; null: the default branch"),
        Param("steps", int, 35, "denoising steps (the app's default)", ge=1),
        Param("guidance_scale", float, 5.0, "classifier-free guidance (the app's default)", ge=0),
        Param("height", int, 768, "pixels, a multiple of 8", ge=8),
        Param("width", int, 1344, "pixels, a multiple of 8", ge=8),
        Param("rate_32", float, 0.5, "share rate in the 1/32-size layers (sa32)", ge=0, le=1),
        Param("rate_64", float, 0.5, "share rate in the other layers (sa64)", ge=0, le=1),
        Param("negative_prompt", str, NEGATIVE_PROMPT, "the adapter's fixed list"),
        Param("trigger", str, "", "put after the onstage names (' img' in the reference mode)"),
        Param("freeu", bool, True, "FreeU (0.6, 0.4, 1.1, 1.2), as the app"),
        Param(
            "missing_id",
            str,
            "none",
            "a character never alone: none (no bank) | fail (its shots fail, as the app stops)",
            choices=MISSING_ID,
        ),
        Param("dtype", str, "auto", "auto: float16 on a GPU (the app's), float32 on the CPU"),
        Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.pipe: Any = None
        self.device: str | None = None
        self.bank: StoryBank | None = None
        self.consistent_layers: list[str] = []

    def output_params(self) -> dict[str, Any]:
        from importlib.metadata import PackageNotFoundError, version

        params = super().output_params()
        try:
            params["diffusers"] = version("diffusers")
        except PackageNotFoundError:
            params["diffusers"] = "not installed"
        return params

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        import torch
        from diffusers import DDIMScheduler, StableDiffusionXLPipeline

        p = self.params
        device = resolve_device(str(p["device"]))
        dtype = (
            torch.float16
            if p["dtype"] == "auto" and device != "cpu"
            else resolve_dtype(str(p["dtype"]), device)
        )
        kwargs: dict[str, Any] = {"dtype": dtype}
        if p["revision"]:
            kwargs["revision"] = p["revision"]
        try:
            pipe = StableDiffusionXLPipeline.from_pretrained(str(p["model"]), **kwargs)
        except Exception as exc:
            raise ComponentError(
                f"image={self.name}: cannot load {p['model']!r} with diffusers."
                f"StableDiffusionXLPipeline: {type(exc).__name__}: {exc}"
            ) from exc
        pipe.scheduler = DDIMScheduler.from_config(pipe.scheduler.config)
        if p["freeu"]:
            pipe.enable_freeu(**FREEU)
        pipe.vae.enable_slicing()  # the app slices its VAE too (memory only)
        pipe.to(device)
        pipe.set_progress_bar_config(disable=True)
        self.bank = StoryBank(
            rate_32=float(p["rate_32"]),
            rate_64=float(p["rate_64"]),
            height=int(p["height"]),
            width=int(p["width"]),
        )
        self.consistent_layers = install(pipe.unet, self.bank)
        self.pipe, self.device = pipe, device

    def unload(self) -> None:
        self.pipe = None
        self.bank = None
        release_cuda_memory()

    # -- a story -----------------------------------------------------------------------------
    def plan(
        self, shots: list[Mapping[str, Any]], characters: list[Mapping[str, Any]]
    ) -> StoryPlan:
        """The app's reading of the story (pure)."""
        general = general_prompt([(c["key"], c["description"]) for c in characters])
        lines = [
            shot_line(
                s["camera"],
                s["plot"],
                s["script"],
                s["scene"],
                s["character_names"],
                self.params["trigger"],
            )
            for s in shots
        ]
        return plan_story(general, lines)

    def draw(self, prompt: str) -> Any:
        """One shot: the long-prompt embeddings, then the pipeline with a fresh generator."""
        import torch

        p = self.params
        embeds, negative, pooled, negative_pooled = encode_sdxl(
            self.pipe, prompt, str(p["negative_prompt"])
        )
        generator = torch.Generator("cpu").manual_seed(int(p["seed"]))
        assert self.bank is not None

        def step_end(pipe: Any, step: int, timestep: Any, kwargs: dict) -> dict:
            self.bank.next_step()
            return kwargs

        with torch.inference_mode():
            output = self.pipe(
                prompt_embeds=embeds,
                negative_prompt_embeds=negative,
                pooled_prompt_embeds=pooled,
                negative_pooled_prompt_embeds=negative_pooled,
                num_inference_steps=int(p["steps"]),
                guidance_scale=float(p["guidance_scale"]),
                height=int(p["height"]),
                width=int(p["width"]),
                generator=generator,
                callback_on_step_end=step_end,
            )
        return output.images[0]

    def run_one(self, item: dict[str, Any]) -> list[Any]:
        """``item`` is the story: ``{"items": [each shot's inputs, in story order]}``."""
        if self.pipe is None:
            self.load()
        assert self.bank is not None
        shots = [s["shot"] for s in item["items"]]
        characters = list(item["items"][0]["characters"]) if item["items"] else []
        plan = self.plan(shots, characters)
        self.bank.tokens = {}  # a new story: nothing of the previous one is shared
        ids = {index: key for key, index in plan.id_shots.items()}
        outputs: list[Any] = [None] * len(shots)
        seed = int(self.params["seed"])
        for index in plan.order:
            missing = [k for k in plan.present[index] if k in plan.without_id]
            if missing and self.params["missing_id"] == "fail":
                outputs[index] = Failure(
                    "model_error",
                    f"{', '.join(missing)} never appear(s) alone in the story, so StoryDiffusion"
                    " has no ID shot for it (the app stops such a story; missing_id=none draws"
                    " it without that character's bank)",
                )
                continue
            if index in ids:
                self.bank.start_shot("write", seed, writer=ids[index])
            else:
                readers = [k for k in plan.present[index] if k in self.bank.tokens]
                self.bank.start_shot("read" if readers else "off", seed, readers=readers)
            try:
                outputs[index] = self.draw(plan.prompts[index])
            except Exception as exc:  # this shot fails alone
                if index in ids:
                    self.bank.tokens.pop(ids[index], None)
                if self.device and self.device.startswith("cuda"):
                    release_cuda_memory()
                outputs[index] = exception_failure(exc)
        self.bank.start_shot("off", seed)
        return outputs


IMAGE_EXPERTS = (StoryDiffusion,)

__all__ = ["IMAGE_EXPERTS", "NEGATIVE_PROMPT", "StoryDiffusion"]
