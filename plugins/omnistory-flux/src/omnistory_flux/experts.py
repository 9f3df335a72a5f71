"""FLUX.1 image experts: ``image=dev`` (text -> image) and ``image=kontext`` (page + text -> image).

Both load a diffusers pipeline with ``from_pretrained`` (a hub id or a local directory), run one
pipeline call per batch with one CPU ``torch.Generator`` per item, and return PIL images.  With
``seed_mode=per_prompt`` (the default) the generator seed of an item is derived from the run's
``seed`` and the item's image prompt only (:func:`omnistory_core.kit.diffusion.item_seed`);
with ``seed_mode=fixed`` every item's generator is seeded with ``seed`` itself, as the official
Omni-StoryBench runner does.  Either way an image does not depend on its batch-mates, and the
Kontext expert's output differs from another item's with the same prompt only through the page it
is conditioned on.  Kontext's ``prompt_prefix`` is prepended to every image prompt (the official
runner prefixes Kontext prompts with an instruction to keep the page's style).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from omnistory_core.api import (
    ComponentError,
    Failure,
    ImageExpert,
    Param,
    ParamError,
    SettingsError,
)
from omnistory_core.kit.diffusion import (
    SEED_MODES,
    arrays_to_images,
    boolean,
    call_with_fallback,
    chunked,
    exception_failure,
    generator_seed,
    key_without_defaults,
    parse_seed_mode,
    parse_settings,
    positive_int,
    release_cuda_memory,
    resolve_device,
    resolve_dtype,
    setting,
)

#: pip requirements of a FLUX environment (FluxKontextPipeline exists from diffusers 0.35; the
#: code is tested with 0.42.1 and passes the ``dtype`` keyword introduced by the 0.4x series)
FLUX_REQUIREMENTS: tuple[str, ...] = (
    "torch>=2.5",
    "diffusers>=0.42.1,<0.43",
    "transformers>=5.0,<6",
    "accelerate>=1.0",
    "safetensors>=0.4",
    # only needed for checkpoints whose T5 tokenizer ships as spiece.model without tokenizer.json
    "sentencepiece>=0.2",
    "protobuf>=4",
)

#: latent pixels per token: VAE downsampling (8) x the transformer's 2x2 patch packing
FLUX_SIZE_MULTIPLE = 16


def flux_parameters(model: str, guidance: float, guidance_doc: str) -> tuple[Param, ...]:
    """The parameters both FLUX.1 experts declare (``defaults`` are derived from them)."""
    return (
        Param(
            "model",
            str,
            model,
            "hub id (gated: accept the licence, set HF_TOKEN) or directory",
            weights=True,
        ),
        Param("revision", str, None, "hub revision (branch, tag or commit); null: default branch"),
        # null (as for every number here) = the default
        Param("steps", (int, None), 28, "denoising steps", ge=1),
        Param("guidance_scale", (float, None), guidance, guidance_doc, ge=0),
        Param("height", (int, None), 1024, f"pixels, a multiple of {FLUX_SIZE_MULTIPLE}", ge=1),
        Param("width", (int, None), 1024, f"pixels, a multiple of {FLUX_SIZE_MULTIPLE}", ge=1),
        Param("max_sequence_length", (int, None), 512, "T5 prompt tokens", ge=1, le=512),
        Param("dtype", str, "auto", "auto: bfloat16 on a GPU, float32 on the CPU"),
        Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
        Param(
            "seed_mode",
            (str, None),
            "per_prompt",
            "per_prompt: noise seeded from seed + prompt | fixed: seed itself (official runner)",
            choices=SEED_MODES,
        ),
    )


@dataclass
class Job:
    """One item on its way to the pipeline."""

    index: int
    prompt: str
    seed: int
    image: Any = None  # Kontext: the page image, already at its conditioning size
    group: tuple = field(default=())  # items with equal groups may share one pipeline call


def kontext_condition_size(
    width: int, height: int, *, auto_resize: bool, multiple: int, preferred: list[tuple[int, int]]
) -> tuple[int, int]:
    """The size (width, height) at which Kontext encodes a page image.

    Mirrors FluxKontextPipeline: the size is rounded down to ``multiple``; with ``auto_resize`` it
    is replaced by the preferred training resolution of the nearest aspect ratio.  The experts
    resize each page themselves and batch only pages of equal size, because the pipeline sizes a
    whole batch after its first image.
    """
    w, h = width - width % multiple, height - height % multiple
    if w < multiple or h < multiple:
        raise ComponentError(
            f"current page image is {width}x{height}, smaller than the model's "
            f"{multiple}-pixel grid"
        )
    if auto_resize:
        aspect = w / h
        _, w, h = min((abs(aspect - pw / ph), pw, ph) for pw, ph in preferred)
    return w - w % multiple, h - h % multiple


class FluxExpert(ImageExpert):
    """Shared loading and batched generation of the FLUX.1 experts (not registered itself)."""

    version = "1"
    default_batch_size = 4
    requirements: ClassVar[tuple[str, ...]] = FLUX_REQUIREMENTS
    pipeline_class: ClassVar[str] = "FluxPipeline"
    defaults: ClassVar[dict[str, Any]] = {}
    #: parameters added after caches were written: in the cache key only when not at these values
    added_defaults: ClassVar[dict[str, Any]] = {"seed_mode": "per_prompt"}

    def __init__(self, **params: Any):
        super().__init__(**params)
        owner = f"image={self.name}"
        params = self.params  # declared: keys and types checked, defaults filled in
        try:
            self.settings = parse_settings(
                owner, params, self.defaults, size_multiple=FLUX_SIZE_MULTIPLE
            )
            self.max_sequence_length = positive_int(
                owner,
                "max_sequence_length",
                setting(params, self.defaults, "max_sequence_length"),
                maximum=512,
            )
            self.seed_mode = parse_seed_mode(owner, params.get("seed_mode"))
            self.prompt_prefix = ""
            self._parse_extra(owner, params)
        except SettingsError as exc:
            raise ParamError(str(exc)) from None
        self.pipe: Any = None
        self.device: str | None = None

    def _parse_extra(self, owner: str, params: dict[str, Any]) -> None:
        """Validate the parameters only one expert has."""

    def output_params(self) -> dict[str, Any]:
        # The pipeline code (schedulers, resizing) lives in diffusers: a new release can change
        # the pixels, so its version is part of the cache key.
        from importlib.metadata import PackageNotFoundError, version

        params = key_without_defaults(
            super().output_params(),
            {key: getattr(self, key) for key in self.added_defaults},
            self.added_defaults,
        )
        try:
            params["diffusers"] = version("diffusers")
        except PackageNotFoundError:
            params["diffusers"] = "not installed"
        return params

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Load the pipeline from ``model`` (hub id or local directory) onto the device."""
        import diffusers

        device = resolve_device(self.settings.device)
        dtype = resolve_dtype(self.settings.dtype, device)
        cls = getattr(diffusers, self.pipeline_class)
        kwargs: dict[str, Any] = {"dtype": dtype}
        if self.settings.revision:
            kwargs["revision"] = self.settings.revision
        try:
            pipe = cls.from_pretrained(self.settings.model, **kwargs)
        except Exception as exc:
            raise ComponentError(
                f"image={self.name}: cannot load {self.settings.model!r} with diffusers."
                f"{self.pipeline_class}: {type(exc).__name__}: {exc}"
            ) from exc
        grid = int(pipe.vae_scale_factor) * 2
        if self.settings.height % grid or self.settings.width % grid:
            raise ComponentError(
                f"image={self.name}: height and width must be multiples of {grid} for "
                f"{self.settings.model!r}, got {self.settings.height}x{self.settings.width}"
            )
        pipe.to(device)
        pipe.set_progress_bar_config(disable=True)
        self.pipe, self.device = pipe, device

    def unload(self) -> None:
        self.pipe = None
        release_cuda_memory()

    # -- calls -----------------------------------------------------------------------------
    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        """One pipeline call per group of up to ``batch_size`` compatible items; an item whose
        call fails is retried alone and, failing again, becomes that item's failure."""
        if self.pipe is None:
            self.load()
        results: list[Any] = [None] * len(items)
        groups: dict[tuple, list[Job]] = {}
        for index, item in enumerate(items):
            prompt = item.get("image_prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                results[index] = Failure("unusable_image_prompt", "the image prompt is empty")
                continue
            try:
                job = self.prepare(index, prompt, item)
            except Exception as exc:  # an unreadable or too-small page image
                results[index] = exception_failure(exc)
                continue
            groups.setdefault(job.group, []).append(job)
        for jobs in groups.values():
            for batch in chunked(jobs, self.batch_size):
                outputs = call_with_fallback(self._generate, batch, self._after_error)
                for job, output in zip(batch, outputs, strict=True):
                    results[job.index] = output
        return results

    def item_seed(self, prompt: str) -> int:
        """The generator seed of an item with the plan's image ``prompt`` (without the prefix)."""
        return generator_seed(self.seed_mode, self.settings.seed, prompt)

    def pipeline_prompt(self, prompt: str) -> str:
        """The prompt the pipeline receives: Kontext's ``prompt_prefix`` + the plan's image
        prompt (dev has no prefix)."""
        return self.prompt_prefix + prompt

    def prepare(self, index: int, prompt: str, item: dict[str, Any]) -> Job:
        return Job(index=index, prompt=self.pipeline_prompt(prompt), seed=self.item_seed(prompt))

    def call_arguments(self, batch: list[Job]) -> dict[str, Any]:
        """Pipeline keywords beyond the shared ones."""
        return {}

    def generators(self, batch: list[Job]) -> list[Any]:
        """One CPU generator per job, seeded with the job's seed (the initial noise is then the
        same on every device, and an item's noise does not depend on its batch-mates)."""
        import torch

        return [torch.Generator("cpu").manual_seed(job.seed) for job in batch]

    def _generate(self, batch: list[Job]) -> list[Any]:
        import torch

        generators = self.generators(batch)
        s = self.settings
        with torch.inference_mode():
            output = self.pipe(
                prompt=[job.prompt for job in batch],
                height=s.height,
                width=s.width,
                num_inference_steps=s.steps,
                guidance_scale=s.guidance_scale,
                max_sequence_length=self.max_sequence_length,
                generator=generators,
                output_type="np",
                **self.call_arguments(batch),
            )
        return arrays_to_images(output.images)

    def _after_error(self, exc: BaseException) -> None:
        if self.device and self.device.startswith("cuda"):
            release_cuda_memory()


class FluxDev(FluxExpert):
    """FLUX.1-dev, text -> image.  Reads only the plan's image prompt, so in a sweep it runs once
    per distinct prompt whatever the planner or the page."""

    name = "dev"
    reads = ("image_prompt",)
    pipeline_class = "FluxPipeline"
    description = "FLUX.1-dev text-to-image (diffusers FluxPipeline)"
    parameters = flux_parameters(
        "black-forest-labs/FLUX.1-dev", 3.5, "distilled guidance (a model input), not CFG"
    )
    defaults = {p.name: p.default for p in parameters}


class FluxKontext(FluxExpert):
    """FLUX.1-Kontext-dev, current page + text -> image: the only expert that sees the page."""

    name = "kontext"
    reads = ("image_prompt", "current_image")
    pipeline_class = "FluxKontextPipeline"
    description = "FLUX.1-Kontext-dev, conditioned on the current page (FluxKontextPipeline)"
    parameters = (
        *flux_parameters(
            "black-forest-labs/FLUX.1-Kontext-dev",
            2.5,
            "the model card's value (the pipeline's default is 3.5)",
        ),
        Param(
            "auto_resize",
            bool,
            True,
            "encode the page at the preferred Kontext resolution of its aspect ratio",
        ),
        Param(
            "prompt_prefix",
            str,
            "",
            "put before every image prompt, verbatim (paper presets: the official runner's)",
        ),
    )
    defaults = {p.name: p.default for p in parameters}
    added_defaults = {"seed_mode": "per_prompt", "prompt_prefix": ""}

    def _parse_extra(self, owner: str, params: dict[str, Any]) -> None:
        self.auto_resize = boolean(
            owner, "auto_resize", setting(params, self.defaults, "auto_resize")
        )
        prefix = setting(params, self.defaults, "prompt_prefix")
        if not isinstance(prefix, str):
            raise SettingsError(f"{owner}: prompt_prefix must be a string, got {prefix!r}")
        self.prompt_prefix = prefix

    def prepare(self, index: int, prompt: str, item: dict[str, Any]) -> Job:
        from diffusers.pipelines.flux.pipeline_flux_kontext import PREFERRED_KONTEXT_RESOLUTIONS

        image = item["current_image"].open_image()
        size = kontext_condition_size(
            image.width,
            image.height,
            auto_resize=self.auto_resize,
            multiple=int(self.pipe.vae_scale_factor) * 2,
            preferred=list(PREFERRED_KONTEXT_RESOLUTIONS),
        )
        if size != image.size:
            image = self.pipe.image_processor.resize(image, size[1], size[0])
        # the noise depends on the prompt alone: the page changes the image only as conditioning
        return Job(
            index=index,
            prompt=self.pipeline_prompt(prompt),
            seed=self.item_seed(prompt),
            image=image,
            group=size,
        )

    def call_arguments(self, batch: list[Job]) -> dict[str, Any]:
        return {
            "image": [job.image for job in batch],
            # keep the requested output size (the pipeline rescales to max_area otherwise)
            "max_area": self.settings.height * self.settings.width,
            # the page is already at its conditioning size (see prepare); a second snap by the
            # pipeline would undo auto_resize=false
            "_auto_resize": False,
        }


IMAGE_EXPERTS = (FluxDev, FluxKontext)
