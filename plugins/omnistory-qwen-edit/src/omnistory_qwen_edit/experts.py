"""Qwen-Image-Edit-2509 image experts (diffusers ``QwenImageEditPlusPipeline``).

* ``image=qwen_edit`` reads ``image_prompt`` and ``current_image``: it edits the one image it is
  given, as Kontext does (the current page on Omni-StoryBench; on ViStoryBench the shot's first
  onstage reference, or whatever ``image=first_ref`` / ``image=sequential`` choose).
* ``image=qwen_edit_story`` is ViStoryBench's official adaptation (``IC/QwenImageEdit2509``):
  one cached call per story (``unit = "group"``), the shots in story order, each shot edited from
  several images: the first reference image of every onstage character, then the previous shot
  (``chain``).  A shot the pipeline fails, or a shot with no image to edit (the official server
  answers such a request with HTTP 400), is that shot's failure; the chain goes on from the
  latest shot that succeeded, as the official client keeps its previous image.

The generator of every call is seeded with ``seed`` itself (``seed_mode=fixed``, the official
server's ``torch.manual_seed(seed)`` per request) or from ``seed`` and the prompt
(``per_prompt``), on the CPU (``generator_device=cpu``) or on the pipeline's device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from omnistory_core.api import (
    ComponentError,
    Failure,
    ImageExpert,
    Media,
    Param,
    ParamError,
)
from omnistory_core.kit.diffusion import (
    SEED_MODES,
    exception_failure,
    generator_seed,
    release_cuda_memory,
    resolve_device,
    resolve_dtype,
)
from omnistory_qwen_edit.pipeline import (
    NOTE_CHARACTERS_ONLY,
    NOTE_WITH_PREVIOUS,
    CallSettings,
    edit,
    jpeg_roundtrip,
    load_pipeline,
)

#: pip requirements of a Qwen-Image-Edit environment
QWEN_EDIT_REQUIREMENTS: tuple[str, ...] = (
    "torch>=2.5",
    "diffusers>=0.42.1,<0.43",
    "transformers>=5.0,<6",
    "accelerate>=1.0",
    "safetensors>=0.4",
    "peft>=0.17",
)
#: how the shots of a story condition each other (``image=qwen_edit_story``)
CHAINS = ("previous", "next_scene")
GENERATOR_DEVICES = ("cpu", "pipeline")


def edit_parameters() -> tuple[Param, ...]:
    """The parameters both experts declare."""
    return (
        Param("model", str, "Qwen/Qwen-Image-Edit-2509", "hub id or directory"),
        Param("revision", str, None, "hub revision; null: the default branch"),
        Param("steps", int, 40, "denoising steps", ge=1),
        Param("true_cfg_scale", float, 4.0, "classifier-free guidance (needs a negative prompt)"),
        Param(
            "negative_prompt",
            (str, None),
            " ",
            "negative prompt; null: none (then no true CFG)",
        ),
        Param("height", (int, None), None, "pixels; null: from the last input image (~1024^2)"),
        Param("width", (int, None), None, "pixels; null: from the last input image (~1024^2)"),
        Param("guidance_scale", (float, None), None, "passed only when set (guidance-distilled)"),
        Param("prompt_prefix", str, "", "put before the image prompt, verbatim"),
        Param("lora", (str, None), None, "LoRA: hub id, directory or file; null: none"),
        Param("lora_weight_name", (str, None), None, "the LoRA's file inside a repo/directory"),
        Param("lora_scale", float, 1.0, "the LoRA's adapter weight", ge=0),
        Param(
            "jpeg_quality",
            (int, None),
            None,
            "JPEG-compress every input image and the output at this quality (the official HTTP"
            " transport's q95); null: lossless",
            ge=1,
            le=100,
        ),
        Param(
            "seed_mode", str, "per_prompt", "per_prompt | fixed (seed itself)", choices=SEED_MODES
        ),
        Param(
            "generator_device",
            str,
            "cpu",
            "cpu | pipeline (the pipeline's device)",
            choices=GENERATOR_DEVICES,
        ),
        Param("dtype", str, "auto", "auto: bfloat16 on a GPU, float32 on the CPU"),
        Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
    )


class QwenEdit(ImageExpert):
    """Qwen-Image-Edit-2509 editing the current image (``image=qwen_edit``)."""

    name = "qwen_edit"
    version = "1"
    reads: ClassVar[tuple[str, ...]] = ("image_prompt", "current_image")
    description = (
        "Qwen-Image-Edit-2509 edits the current image (diffusers QwenImageEditPlusPipeline)"
    )
    requirements: ClassVar[tuple[str, ...]] = QWEN_EDIT_REQUIREMENTS
    parameters = edit_parameters()

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        p = self.params
        for side in ("height", "width"):
            if p[side] is not None and (p[side] < 16 or p[side] % 16):
                raise ParamError(
                    f"image={self.name}: {side} must be a multiple of 16 (>= 16), got {p[side]}"
                )
        if (p["height"] is None) != (p["width"] is None):
            raise ParamError(f"image={self.name}: set both height and width, or neither")
        self.call = CallSettings(
            steps=int(p["steps"]),
            true_cfg_scale=float(p["true_cfg_scale"]),
            negative_prompt=p["negative_prompt"],
            height=p["height"],
            width=p["width"],
            guidance_scale=p["guidance_scale"],
        )
        self.pipe: Any = None
        self.device: str | None = None

    def output_params(self) -> dict[str, Any]:
        # the scheduler and the image resizing live in diffusers: its version is in the key
        from importlib.metadata import PackageNotFoundError, version

        params = super().output_params()
        try:
            params["diffusers"] = version("diffusers")
        except PackageNotFoundError:
            params["diffusers"] = "not installed"
        return params

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        p = self.params
        device = resolve_device(str(p["device"]))
        dtype = resolve_dtype(str(p["dtype"]), device)
        try:
            self.pipe = load_pipeline(
                str(p["model"]),
                revision=p["revision"],
                dtype=dtype,
                device=device,
                lora=p["lora"],
                lora_weight_name=p["lora_weight_name"],
                lora_scale=float(p["lora_scale"]),
            )
        except Exception as exc:
            what = f"{p['model']!r}" + (f" with the LoRA {p['lora']!r}" if p["lora"] else "")
            raise ComponentError(
                f"image={self.name}: cannot load {what} with diffusers.QwenImageEditPlusPipeline:"
                f" {type(exc).__name__}: {exc}"
            ) from exc
        self.device = device

    def unload(self) -> None:
        self.pipe = None
        release_cuda_memory()

    # -- one edit ----------------------------------------------------------------------------
    def generator(self, prompt: str) -> Any:
        import torch

        seed = generator_seed(str(self.params["seed_mode"]), int(self.params["seed"]), prompt)
        where = "cpu" if self.params["generator_device"] == "cpu" else self.device
        return torch.Generator(where).manual_seed(seed)

    def edit_images(self, prompt: str, images: Sequence[Any]) -> Any:
        """The pipeline on ``images`` (PIL) with ``prompt`` as given (prefix and notes added by
        the caller); inputs and output pass the JPEG round trip when ``jpeg_quality`` is set."""
        if self.pipe is None:
            self.load()
        quality = self.params["jpeg_quality"]
        inputs = [jpeg_roundtrip(image, quality) for image in images]
        output = edit(self.pipe, prompt, inputs, self.call, self.generator(prompt))
        return jpeg_roundtrip(output, quality)

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        # the pipeline takes one prompt per call (QwenImageEditPlusPipeline refuses batches)
        return [self.run_one(item) for item in items]

    def run_one(self, item: dict[str, Any]) -> Any:
        prompt = item.get("image_prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return Failure("unusable_image_prompt", "the image prompt is empty")
        page = item.get("current_image")
        if not isinstance(page, Media):
            return Failure("model_error", "no current image to edit")
        try:
            return self.edit_images(self.params["prompt_prefix"] + prompt, [page.open_image()])
        except Exception as exc:  # one item's failure
            self._after_error()
            return exception_failure(exc)

    def _after_error(self) -> None:
        if self.device and self.device.startswith("cuda"):
            release_cuda_memory()


def first_references(character_refs: Sequence[Mapping[str, Any]]) -> list[Media]:
    """The first reference image of each onstage character that has one, in shot order (the
    official ``story_prompt_merge``'s ``image_paths``)."""
    return [ref["images"][0] for ref in character_refs if ref.get("images")]


def reference_note(n_characters: int, with_previous: bool) -> str:
    """The sentence the official server appends to a prompt with images."""
    if with_previous:
        return NOTE_WITH_PREVIOUS
    return NOTE_CHARACTERS_ONLY if n_characters else ""


class QwenEditStory(QwenEdit):
    """ViStoryBench's official Qwen-Image-Edit adaptation: one call per story
    (``image=qwen_edit_story``)."""

    name = "qwen_edit_story"
    unit = "group"
    reads = ("image_prompt", "character_refs")
    description = (
        "ViStoryBench's Qwen-Image-Edit adaptation: each shot edited from its characters' first"
        " references and the previous shot, one call per story"
    )
    parameters = (
        *edit_parameters(),
        Param(
            "chain",
            str,
            "previous",
            "previous: every shot gets its characters then the latest successful shot |"
            " next_scene: the story's first shot its characters, every later shot the previous"
            " shot alone",
            choices=CHAINS,
        ),
        Param(
            "reference_note",
            bool,
            True,
            "append the official server's sentence saying what the images are",
        ),
    )

    def shot_images(
        self, position: int, shot: Mapping[str, Any], previous: Any
    ) -> tuple[list[Any], int]:
        """The PIL images of shot ``position`` (0-based in the story) and how many are character
        references."""
        characters = [media.open_image() for media in first_references(shot["character_refs"])]
        if self.params["chain"] == "next_scene" and position > 0:
            characters = []
        elif self.params["chain"] == "next_scene":
            previous = None
        images = characters + ([previous] if previous is not None else [])
        return images, len(characters)

    def run_one(self, item: dict[str, Any]) -> list[Any]:
        """``item`` is the story: ``{"items": [each shot's inputs, in story order]}``; one
        image or failure per shot."""
        if self.pipe is None:
            self.load()
        outputs: list[Any] = []
        previous: Any = None
        for position, shot in enumerate(item["items"]):
            prompt = shot.get("image_prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                outputs.append(Failure("unusable_image_prompt", "the image prompt is empty"))
                continue
            try:
                images, n_characters = self.shot_images(position, shot, previous)
                if not images:
                    outputs.append(
                        Failure(
                            "model_error",
                            "no image to edit: the shot has no onstage character with a"
                            " reference and no previous shot (the official server refuses"
                            " such a request with HTTP 400)",
                        )
                    )
                    continue
                text = self.params["prompt_prefix"] + prompt
                if self.params["reference_note"]:
                    text += reference_note(n_characters, len(images) > n_characters)
                picture = self.edit_images(text, images)
            except Exception as exc:  # this shot fails alone; the chain goes on
                self._after_error()
                outputs.append(exception_failure(exc))
                continue
            outputs.append(picture)
            previous = picture
        return outputs


IMAGE_EXPERTS = (QwenEdit, QwenEditStory)

__all__ = ["CHAINS", "IMAGE_EXPERTS", "QwenEdit", "QwenEditStory", "first_references"]
