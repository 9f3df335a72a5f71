"""AMD Nitro-T-1.2B image expert (``image=nitro``): text -> image.

Nitro-T ships its own pipeline and transformer code in the checkpoint (``pipeline.py``,
``transformer/transformer.py``), loaded by diffusers with ``trust_remote_code=True``; its text
encoder is Llama-3.2-1B (gated), loaded separately with ``AutoModelForCausalLM`` and handed to the
pipeline, as the model card does.  Generation follows the card's call
``pipe(prompt, height, width, num_inference_steps, guidance_scale, generator)``.

Noise: one ``torch.Generator`` per prompt, on the pipeline's device (``generator_device=pipeline``,
the default) or on the CPU (``generator_device=cpu``, the official Omni-StoryBench runner), seeded
from ``seed`` and the prompt (``seed_mode=per_prompt``, the default) or with ``seed`` itself for
every image (``seed_mode=fixed``, the official runner).
"""

from __future__ import annotations

from dataclasses import dataclass
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
    generator_seed,
    key_without_defaults,
    parse_seed_mode,
    parse_settings,
    release_cuda_memory,
    resolve_device,
    resolve_dtype,
    setting,
)

#: pip requirements of a Nitro-T environment.  The model card asks for diffusers >= 0.34; the code
#: is tested (on a stand-in pipeline, see README) with diffusers 0.42.1 and transformers 5.24.
NITRO_REQUIREMENTS: tuple[str, ...] = (
    "torch>=2.5",
    "diffusers>=0.42.1,<0.43",
    "transformers>=5.0,<6",
    "accelerate>=1.0",
    "safetensors>=0.4",
)

#: Nitro-T's DC-AE compresses 32x; sizes off this grid cannot be encoded
NITRO_SIZE_MULTIPLE = 32

#: where the noise generators live: the pipeline's device, or the CPU
GENERATOR_DEVICES = ("pipeline", "cpu")


@dataclass
class Job:
    index: int
    prompt: str
    seed: int


def describe_load_error(exc: BaseException) -> str:
    """A hint for the usual reasons loading Nitro-T fails (gated repos, remote code, no network)."""
    text = f"{type(exc).__name__}: {exc}"
    names = {cls.__name__ for cls in type(exc).__mro__}
    lowered = text.lower()
    if "GatedRepoError" in names or "gated" in lowered or "401" in lowered:
        return (
            text + " -- the checkpoint is gated: accept its licence on the hub and provide "
            "HF_TOKEN (meta-llama/Llama-3.2-1B is gated too)"
        )
    if "trust_remote_code" in lowered or "remote code" in lowered:
        return text + " -- Nitro-T's pipeline is code in the checkpoint: set trust_remote_code=true"
    if "LocalEntryNotFoundError" in names or "offline" in lowered:
        return text + " -- not in the local cache and the hub cannot be reached (HF_HUB_OFFLINE?)"
    return text


class NitroT(ImageExpert):
    """AMD Nitro-T-1.2B (1024 px MMDiT, DC-AE, Llama-3.2-1B text encoder), text -> image."""

    name = "nitro"
    version = "1"
    reads = ("image_prompt",)
    # one prompt per call, exactly as the model card calls it; whether the remote pipeline takes a
    # list of prompts with one generator each is not verified (batch_size > 1 tries it)
    default_batch_size = 1
    description = "AMD Nitro-T-1.2B text-to-image (remote pipeline code, Llama-3.2-1B encoder)"
    requirements: ClassVar[tuple[str, ...]] = NITRO_REQUIREMENTS
    # null (as for every number here) = the default
    parameters = (
        Param(
            "model",
            str,
            "amd/Nitro-T-1.2B",
            "hub id or directory (ships its pipeline code)",
            weights=True,
        ),
        Param("revision", str, None, "hub revision (branch, tag or commit); null: default branch"),
        Param("text_encoder", str, "meta-llama/Llama-3.2-1B", "text encoder (gated: set HF_TOKEN)"),
        Param("text_encoder_revision", str, None, "hub revision of text_encoder"),
        Param("steps", (int, None), 20, "denoising steps", ge=1),
        Param("guidance_scale", (float, None), 4.0, "classifier-free guidance scale", ge=0),
        Param("height", (int, None), 1024, f"pixels, a multiple of {NITRO_SIZE_MULTIPLE}", ge=1),
        Param("width", (int, None), 1024, f"pixels, a multiple of {NITRO_SIZE_MULTIPLE}", ge=1),
        Param("dtype", str, "auto", "auto: bfloat16 on a GPU, float32 on the CPU"),
        Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
        Param("trust_remote_code", bool, True, "required: the pipeline is code in the checkpoint"),
        Param(
            "seed_mode",
            (str, None),
            "per_prompt",
            "per_prompt: noise seeded from seed + prompt | fixed: seed itself (official runner)",
            choices=SEED_MODES,
        ),
        Param(
            "generator_device",
            str,
            "pipeline",
            "pipeline: the pipeline's device (model card) | cpu (official runner)",
            choices=GENERATOR_DEVICES,
        ),
    )
    defaults: ClassVar[dict[str, Any]] = {p.name: p.default for p in parameters}
    #: parameters added after caches were written: in the cache key only when not at these values
    added_defaults: ClassVar[dict[str, Any]] = {
        "seed_mode": "per_prompt",
        "generator_device": "pipeline",
    }

    def __init__(self, **params: Any):
        super().__init__(**params)
        owner = f"image={self.name}"
        params = self.params  # declared: keys and types checked, defaults filled in
        try:
            self.settings = parse_settings(
                owner, params, self.defaults, size_multiple=NITRO_SIZE_MULTIPLE
            )
            text_encoder = setting(params, self.defaults, "text_encoder")
            if not isinstance(text_encoder, str) or not text_encoder.strip():
                raise SettingsError(
                    f"{owner}: text_encoder must be a checkpoint id or a local "
                    f"path, got {text_encoder!r}"
                )
            self.text_encoder = text_encoder
            self.text_encoder_revision = params.get("text_encoder_revision")
            self.trust_remote_code = boolean(
                owner, "trust_remote_code", setting(params, self.defaults, "trust_remote_code")
            )
            self.seed_mode = parse_seed_mode(owner, params.get("seed_mode"))
            generator_device = setting(params, self.defaults, "generator_device")
            if generator_device not in GENERATOR_DEVICES:
                raise SettingsError(
                    f"{owner}: generator_device must be one of {', '.join(GENERATOR_DEVICES)}, "
                    f"got {generator_device!r}"
                )
            self.generator_device = generator_device
        except SettingsError as exc:
            raise ParamError(str(exc)) from None
        self.pipe: Any = None
        self.device: str | None = None

    def output_params(self) -> dict[str, Any]:
        # diffusers runs the scheduler and image processing around the remote code
        from importlib.metadata import PackageNotFoundError, version

        params = key_without_defaults(
            super().output_params(),
            {"seed_mode": self.seed_mode, "generator_device": self.generator_device},
            self.added_defaults,
        )
        try:
            params["diffusers"] = version("diffusers")
        except PackageNotFoundError:
            params["diffusers"] = "not installed"
        return params

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Load Llama-3.2-1B, then the Nitro-T pipeline (remote code) with it as text encoder."""
        from diffusers import DiffusionPipeline
        from transformers import AutoModelForCausalLM

        device = resolve_device(self.settings.device)
        dtype = resolve_dtype(self.settings.dtype, device)
        try:
            text_encoder = AutoModelForCausalLM.from_pretrained(
                self.text_encoder,
                dtype=dtype,
                **({"revision": self.text_encoder_revision} if self.text_encoder_revision else {}),
            )
        except Exception as exc:
            raise ComponentError(
                f"image={self.name}: cannot load the text encoder "
                f"{self.text_encoder!r}: {describe_load_error(exc)}"
            ) from exc
        kwargs: dict[str, Any] = {
            "text_encoder": text_encoder,
            "dtype": dtype,
            "trust_remote_code": self.trust_remote_code,
        }
        if self.settings.revision:
            kwargs["revision"] = self.settings.revision
        try:
            pipe = DiffusionPipeline.from_pretrained(self.settings.model, **kwargs)
        except Exception as exc:
            raise ComponentError(
                f"image={self.name}: cannot load {self.settings.model!r}: "
                f"{describe_load_error(exc)}"
            ) from exc
        pipe.to(device)
        if hasattr(pipe, "set_progress_bar_config"):
            pipe.set_progress_bar_config(disable=True)
        self.pipe, self.device = pipe, device

    def unload(self) -> None:
        self.pipe = None
        release_cuda_memory()

    # -- calls -----------------------------------------------------------------------------
    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        """Up to ``batch_size`` prompts per pipeline call; failures are per item (see FLUX)."""
        if self.pipe is None:
            self.load()
        results: list[Any] = [None] * len(items)
        jobs: list[Job] = []
        for index, item in enumerate(items):
            prompt = item.get("image_prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                results[index] = Failure("unusable_image_prompt", "the image prompt is empty")
                continue
            jobs.append(Job(index, prompt, self.item_seed(prompt)))
        for batch in chunked(jobs, self.batch_size):
            outputs = call_with_fallback(self._generate, batch, self._after_error)
            for job, output in zip(batch, outputs, strict=True):
                results[job.index] = output
        return results

    def item_seed(self, prompt: str) -> int:
        """The generator seed of the item with this image prompt (see ``seed_mode``)."""
        return generator_seed(self.seed_mode, self.settings.seed, prompt)

    def generators(self, batch: list[Job]) -> list[Any]:
        """One seeded generator per job: on the pipeline's device (like the model card: remote
        code may draw its noise there) or, with ``generator_device=cpu``, on the CPU."""
        import torch

        device = "cpu" if self.generator_device == "cpu" else self.device
        return [torch.Generator(device).manual_seed(job.seed) for job in batch]

    def _generate(self, batch: list[Job]) -> list[Any]:
        import torch

        generators = self.generators(batch)
        single = len(batch) == 1
        s = self.settings
        with torch.inference_mode():
            output = self.pipe(
                prompt=batch[0].prompt if single else [job.prompt for job in batch],
                height=s.height,
                width=s.width,
                num_inference_steps=s.steps,
                guidance_scale=s.guidance_scale,
                generator=generators[0] if single else generators,
            )
        images = output.images if hasattr(output, "images") else output[0]
        return to_images(images)

    def _after_error(self, exc: BaseException) -> None:
        if self.device and self.device.startswith("cuda"):
            release_cuda_memory()


def to_images(images: Any) -> list[Any]:
    """The pipeline's ``images`` (PIL list, numpy array or tensor) -> PIL images or failures."""
    if isinstance(images, list | tuple) and all(hasattr(im, "convert") for im in images):
        return [im.convert("RGB") for im in images]
    if hasattr(images, "detach"):  # a tensor in [0, 1], (N, C, H, W)
        images = images.detach().float().cpu().permute(0, 2, 3, 1).numpy()
    return arrays_to_images(images)


IMAGE_EXPERTS = (NitroT,)
