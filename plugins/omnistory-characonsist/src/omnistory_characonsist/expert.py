"""CharaConsist on ViStoryBench (``image=characonsist``), one call per story, from a checkout of
Murray-Wang/CharaConsist (``image.source_dir``).

As ViStoryBench's script runs it (``IC/CharaConsist/gen-mix.py``): text only (reference images
are never given to the pipeline); the prompts of :mod:`omnistory_characonsist.story`; per story
the attention processors reset to the output size, the ID shot drawn with ``is_id=True``, then
every other shot as a pre-run (``is_pre_run=True``) and a final run, the spatial state carried
from call to call, the token lengths of the background and of the whole prompt set before each
(``tokenizer_2``, 512 tokens); 1344x768, ``use_interpolate`` and ``share_bg`` off, a CPU
generator seeded with ``seed`` (0) for every call; steps and guidance left to the pipeline (50,
3.5); bfloat16 on a GPU.  A shot that fails is that shot's failure; when the ID shot fails,
the story's other shots are not drawn (``upstream_failed``), as the script stops there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from omnistory_characonsist.source import CHECKOUT, Upstream, import_upstream
from omnistory_characonsist.story import Segments, drawing_order, primary_character, segments
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

#: CharaConsist's requirements.txt
REQUIREMENTS: tuple[str, ...] = (
    "torch==2.3.1",
    "torchvision==0.18.1",
    "accelerate==1.6.0",
    "diffusers==0.32.2",
    "transformers==4.49.0",
    "sentencepiece",
    "protobuf",
)
#: ``tokenizer_2``'s padded length, as the script measures prompts
TEXT_TOKENS = 512


class CharaConsist(ImageExpert):
    """CharaConsist (FLUX.1-dev with point-tracking attention), text only, one call per story."""

    name = "characonsist"
    version = "1"
    unit = "group"
    reads: ClassVar[tuple[str, ...]] = ("shot", "characters")
    description = (
        "CharaConsist (checkout of Murray-Wang/CharaConsist, FLUX.1-dev): a story's primary"
        " character kept consistent, one call per story"
    )
    requirements: ClassVar[tuple[str, ...]] = REQUIREMENTS
    parameters = (
        CHECKOUT.declaration(),
        Param("model", str, "black-forest-labs/FLUX.1-dev", "FLUX.1-dev hub id or directory"),
        Param("height", int, 768, "pixels, a multiple of 16", ge=16),
        Param("width", int, 1344, "pixels, a multiple of 16", ge=16),
        Param("steps", (int, None), None, "denoising steps; null: the pipeline's (50)", ge=1),
        Param("guidance_scale", (float, None), None, "null: the pipeline's (3.5)", ge=0),
        Param("use_interpolate", bool, False, "CharaConsist's interpolation (script: off)"),
        Param("share_bg", bool, False, "share the background (script: off)"),
        Param(
            "primary_character",
            (str, None),
            None,
            "the primary character's key; null: the most frequent",
        ),
        Param("dtype", str, "auto", "auto: bfloat16 on a GPU (the script's), float32 on the CPU"),
        Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
    )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        p = self.params
        for side in ("height", "width"):
            if p[side] % 16:
                raise ParamError(f"image={self.name}: {side} must be a multiple of 16")
        try:
            self.source_dir = CHECKOUT.check_dir(p["source_dir"])
        except CheckoutError as exc:
            raise ParamError(str(exc)) from None
        self.source_digest = CHECKOUT.digest(self.source_dir)
        self.source_revision = git_revision(self.source_dir)
        self.pipe: Any = None
        self.upstream: Upstream | None = None
        self.device: str | None = None

    def output_params(self) -> dict[str, Any]:
        return {**super().output_params(), "source_tree": self.source_digest}

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        p = self.params
        try:
            upstream = import_upstream(self.source_dir)
        except Exception as exc:
            raise ComponentError(
                f"{CHECKOUT.component}: cannot import CharaConsist's code from"
                f" image.source_dir={self.source_dir}: {type(exc).__name__}: {exc} -- run it in"
                " an environment with CharaConsist's requirements (image.runner.python=...); if"
                f" the checkout is incomplete, {CHECKOUT.get_it()}"
            ) from exc
        device = resolve_device(str(p["device"]))
        dtype = resolve_dtype(str(p["dtype"]), device)
        try:
            pipe = upstream.CharaConsistPipeline.from_pretrained(str(p["model"]), torch_dtype=dtype)
        except Exception as exc:
            raise ComponentError(
                f"image={self.name}: cannot load {p['model']!r} with CharaConsistPipeline:"
                f" {type(exc).__name__}: {exc}"
            ) from exc
        pipe.to(device)
        if hasattr(pipe, "set_progress_bar_config"):
            pipe.set_progress_bar_config(disable=True)
        self.pipe, self.upstream, self.device = pipe, upstream, device

    def unload(self) -> None:
        self.pipe = None
        release_cuda_memory()

    # -- a story -----------------------------------------------------------------------------
    def text_length(self, text: str) -> int:
        mask = self.pipe.tokenizer_2(
            text,
            padding="max_length",
            max_length=TEXT_TOKENS,
            truncation=True,
            return_tensors="pt",
        ).attention_mask
        return int(mask.sum().item() - 1)

    def plan(
        self, shots: list[Mapping[str, Any]], cast: list[Mapping[str, Any]]
    ) -> tuple[list[Segments], list[int]]:
        """Each shot's segments and the drawing order (pure but for nothing)."""
        onstage = [list(s["character_keys"]) for s in shots]
        primary = primary_character(
            onstage, [c["key"] for c in cast], self.params["primary_character"]
        )
        descriptions = {c["key"]: c["description"] for c in cast}
        fg = descriptions.get(primary or "", "")
        return [segments(s, fg) for s in shots], drawing_order(onstage, primary)

    def call(self, prompt: Segments, **flags: Any) -> tuple[Any, Any]:
        import torch

        p = self.params
        assert self.upstream is not None
        self.upstream.set_text_len(
            self.pipe, self.text_length(prompt.background), self.text_length(prompt.prompt)
        )
        kwargs: dict[str, Any] = {
            "height": int(p["height"]),
            "width": int(p["width"]),
            "use_interpolate": bool(p["use_interpolate"]),
            "share_bg": bool(p["share_bg"]),
            "generator": torch.Generator("cpu").manual_seed(int(p["seed"])),
            **flags,
        }
        if p["steps"] is not None:
            kwargs["num_inference_steps"] = int(p["steps"])
        if p["guidance_scale"] is not None:
            kwargs["guidance_scale"] = float(p["guidance_scale"])
        return self.pipe(prompt.prompt, **kwargs)

    def run_one(self, item: dict[str, Any]) -> list[Any]:
        """``item`` is the story: ``{"items": [each shot's inputs, in story order]}``."""
        if self.pipe is None:
            self.load()
        assert self.upstream is not None
        shots = [s["shot"] for s in item["items"]]
        cast = list(item["items"][0]["characters"]) if item["items"] else []
        prompts, order = self.plan(shots, cast)
        outputs: list[Any] = [None] * len(shots)
        p = self.params
        self.upstream.reset_attn_processor(self.pipe, size=(p["height"] // 16, p["width"] // 16))
        self.upstream.reset_size(self.pipe, p["height"], p["width"])
        try:
            first = order[0]
            try:
                images, spatial = self.call(prompts[first], is_id=True)
            except Exception as exc:
                outputs[first] = exception_failure(exc)
                for index in order[1:]:
                    outputs[index] = Failure(
                        "upstream_failed",
                        f"the story's ID shot ({shots[first]['index']}) failed, so CharaConsist"
                        " has no character state for the other shots (the script stops there)",
                    )
                return outputs
            outputs[first] = images[0]
            state = {"id_fg_mask": spatial["curr_fg_mask"], "id_bg_mask": ~spatial["curr_fg_mask"]}
            for index in order[1:]:
                try:
                    _, state = self.call(prompts[index], is_pre_run=True, spatial_kwargs=state)
                    images, state = self.call(prompts[index], spatial_kwargs=state)
                    outputs[index] = images[0]
                except Exception as exc:  # this shot fails alone
                    outputs[index] = exception_failure(exc)
        finally:
            self.upstream.reset_id_bank(self.pipe)
        return outputs


IMAGE_EXPERTS = (CharaConsist,)

__all__ = ["IMAGE_EXPERTS", "CharaConsist"]
