"""UNO image experts, from a checkout of bytedance/UNO (``image.source_dir``).

* ``image=uno_refs`` is ViStoryBench's official adaptation (``DP/adapt2uno.py`` +
  ``IC/uno/inference_custom.py``): per shot, the merged prompt and the first reference image of
  every onstage character (none: no reference), each passed through UNO's ``preprocess_ref`` at
  ``ref_size`` (-1: 512 for a single reference, 320 otherwise); ``UNOPipeline("flux-dev",
  only_lora=True, lora_rank=512)``; 1344x768, 25 steps, guidance 4, ``pe="d"``, seed 42 for
  every shot.  The official script fixes ``ref_size`` at the first shot of the whole run and
  keeps it for every later shot; a run that wants that quirk sets ``ref_size`` to the value its
  first shot gets (README).
* ``image=uno`` takes the current image as its single reference (the page on Omni-StoryBench).

UNO's weights are CC BY-NC 4.0 (non-commercial), on top of the FLUX.1-dev licence.
"""

from __future__ import annotations

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
from omnistory_core.kit.diffusion import exception_failure, release_cuda_memory, resolve_device
from omnistory_uno.source import CHECKOUT, WEIGHT_VARIABLES, import_upstream, weights_environment

#: UNO's pyproject/requirements stack (run it with image.runner.python)
REQUIREMENTS: tuple[str, ...] = (
    "torch==2.4.0",
    "torchvision==0.19.0",
    "transformers==4.43.3",
    "diffusers==0.30.1",
    "einops==0.8.0",
    "sentencepiece==0.2.0",
    "accelerate",
    "huggingface-hub",
    "safetensors",
)
POSITIONS = ("d", "h", "w", "o")


class Uno(ImageExpert):
    """UNO with the current image as its reference (``image=uno``)."""

    name = "uno"
    version = "1"
    reads: ClassVar[tuple[str, ...]] = ("image_prompt", "current_image")
    description = "UNO (checkout of bytedance/UNO, FLUX.1-dev + UNO LoRA) on the current image"
    requirements: ClassVar[tuple[str, ...]] = REQUIREMENTS
    parameters = (
        CHECKOUT.declaration(),
        Param("model_type", str, "flux-dev", "UNO's model type", choices=("flux-dev",)),
        Param("flux_dev", (str, None), None, "flux1-dev.safetensors (FLUX_DEV); null: the hub"),
        Param("ae", (str, None), None, "ae.safetensors (AE); null: the hub"),
        Param("lora", (str, None), None, "UNO's dit_lora.safetensors (LORA); null: the hub"),
        Param("t5", str, "xlabs-ai/xflux_text_encoders", "T5 encoder (T5)"),
        Param("clip", str, "openai/clip-vit-large-patch14", "CLIP encoder (CLIP)"),
        Param("only_lora", bool, True, "load UNO as a LoRA on FLUX.1-dev"),
        Param("lora_rank", int, 512, "the LoRA's rank", ge=1),
        Param("steps", int, 25, "denoising steps (num_steps)", ge=1),
        Param("guidance", float, 4.0, "FLUX guidance", ge=0),
        Param("height", int, 768, "pixels (UNO rounds down to 16)", ge=16),
        Param("width", int, 1344, "pixels (UNO rounds down to 16)", ge=16),
        Param("ref_size", int, -1, "long side of each reference; -1: 512 for one, else 320"),
        Param("pe", str, "d", "UNO's position-index mode", choices=POSITIONS),
        Param("offload", bool, False, "UNO's CPU offload", runtime=True),
        Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        size = self.params["ref_size"]
        if size != -1 and size < 16:
            raise ParamError(f"image={self.name}: ref_size must be -1 or >= 16, got {size}")
        try:
            self.source_dir = CHECKOUT.check_dir(self.params["source_dir"])
        except CheckoutError as exc:
            raise ParamError(str(exc)) from None
        self.source_digest = CHECKOUT.digest(self.source_dir)
        self.source_revision = git_revision(self.source_dir)
        self.pipe: Any = None
        self.preprocess_ref: Any = None
        self.device: str | None = None

    def output_params(self) -> dict[str, Any]:
        return {**super().output_params(), "source_tree": self.source_digest}

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        p = self.params
        weights = {key: p[key] for key in WEIGHT_VARIABLES}
        device = resolve_device(str(p["device"]))
        with weights_environment(weights):
            try:
                upstream = import_upstream(self.source_dir)
            except Exception as exc:
                raise ComponentError(
                    f"{CHECKOUT.component}: cannot import UNO's code from"
                    f" image.source_dir={self.source_dir}: {type(exc).__name__}: {exc} -- run it"
                    " in an environment with UNO's requirements (image.runner.python=...); if the"
                    f" checkout is incomplete, {CHECKOUT.get_it()}"
                ) from exc
            try:
                self.pipe = upstream.UNOPipeline(
                    str(p["model_type"]),
                    device,
                    bool(p["offload"]),
                    only_lora=bool(p["only_lora"]),
                    lora_rank=int(p["lora_rank"]),
                )
            except Exception as exc:
                raise ComponentError(
                    f"image={self.name}: cannot build UNOPipeline({p['model_type']!r}):"
                    f" {type(exc).__name__}: {exc}"
                ) from exc
        self.preprocess_ref, self.device = upstream.preprocess_ref, device

    def unload(self) -> None:
        self.pipe = None
        release_cuda_memory()

    # -- calls -------------------------------------------------------------------------------
    def reference_size(self, n_references: int) -> int:
        size = int(self.params["ref_size"])
        if size != -1:
            return size
        return 512 if n_references == 1 else 320

    def generate(self, prompt: str, references: Sequence[Any]) -> Any:
        if self.pipe is None:
            self.load()
        p = self.params
        size = self.reference_size(len(references))
        refs = [self.preprocess_ref(image, size) for image in references]
        return self.pipe(
            prompt=prompt,
            width=int(p["width"]),
            height=int(p["height"]),
            guidance=float(p["guidance"]),
            num_steps=int(p["steps"]),
            seed=int(p["seed"]),
            ref_imgs=refs,
            pe=str(p["pe"]),
        )

    def references(self, item: Mapping[str, Any]) -> list[Any]:
        page = item.get("current_image")
        return [page.open_image()] if isinstance(page, Media) else []

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        return [self.run_one(item) for item in items]

    def run_one(self, item: dict[str, Any]) -> Any:
        prompt = item.get("image_prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return Failure("unusable_image_prompt", "the image prompt is empty")
        try:
            return self.generate(prompt, self.references(item))
        except Exception as exc:  # one shot's failure
            if self.device and self.device.startswith("cuda"):
                release_cuda_memory()
            return exception_failure(exc)


class UnoReferences(Uno):
    """ViStoryBench's official UNO adaptation (``image=uno_refs``): every onstage character's
    first reference image."""

    name = "uno_refs"
    reads = ("image_prompt", "character_refs")
    description = (
        "UNO (checkout) per shot on the first reference of every onstage character,"
        " ViStoryBench's adaptation"
    )

    def references(self, item: Mapping[str, Any]) -> list[Any]:
        # opened as the official script opens them (Image.open; preprocess_ref converts to RGB)
        from PIL import Image

        refs = item.get("character_refs") or []
        out = []
        for ref in refs:
            if ref.get("images"):
                with Image.open(ref["images"][0].path) as image:
                    image.load()
                    out.append(image.copy())
        return out


IMAGE_EXPERTS = (Uno, UnoReferences)

__all__ = ["IMAGE_EXPERTS", "Uno", "UnoReferences"]
