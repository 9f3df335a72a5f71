"""MMaDA-8B-MixCoT + MAGVIT-v2 as a semi-orchestration T+I backbone (``backbone=mmada``).

One ``run_one`` = the official Omni-StoryBench runner's two MMaDA passes (one cached record):

1. understanding (MMU): the current page, resized to ``resolution`` px and turned into MAGVIT-v2
   codes, wrapped in ``<|mmu|><|soi|> ... <|eoi|>`` before the chat-templated prompt (system +
   user turn, see :mod:`omnistory_mmada.prompts`); ``mmu_generate`` answers with a JSON object
   holding the narration, a quote, a t2i description and speech metadata
   (:mod:`omnistory_mmada.parsing`);
2. text-to-image: the t2i description plus the official quality suffix, with classifier-free
   guidance against the empty prompt; ``t2i_generate`` samples MAGVIT-v2 codes that the VQ model
   decodes.  The current page is not shown at this pass.

The spoken line and its voice labels go to the TTS expert as ``plan["speech"]``.  MMaDA's code comes
from a checkout of its git repository (``source_dir``), see :mod:`omnistory_mmada.source`.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from omnistory_core.api import (
    BackboneOutput,
    ComponentError,
    Failure,
    Param,
    SettingsError,
)
from omnistory_core.kit.checkout import CheckoutBackbone
from omnistory_core.kit.diffusion import (
    DTYPE_NAMES,
    exception_failure,
    item_seed,
    non_negative_float,
    positive_int,
    release_cuda_memory,
    resolve_device,
    resolve_dtype,
    setting,
)
from omnistory_mmada.parsing import interpret
from omnistory_mmada.prompts import mmu_messages, t2i_prompt
from omnistory_mmada.source import CHECKOUT, PINNED_COMMIT, import_upstream

#: the environment of MMaDA's code: the inference subset of the repository's requirements.txt
#: with its pins (transformers, diffusers); torch as in the official Omni-StoryBench environment
MMADA_REQUIREMENTS: tuple[str, ...] = (
    "torch==2.10.0",
    "torchvision==0.25.0",
    "transformers==4.46.0",
    "diffusers==0.32.2",
    "accelerate",
    "einops",
    "jaxtyping",
    "typeguard",
    "omegaconf",
    "safetensors",
    "numpy",
    "pillow",
)

#: the special tokens the upstream scripts hand UniversalPrompting (reserved ids of the tokenizer)
SPECIAL_TOKENS: tuple[str, ...] = (
    "<|soi|>",
    "<|eoi|>",
    "<|sov|>",
    "<|eov|>",
    "<|t2i|>",
    "<|mmu|>",
    "<|t2v|>",
    "<|v2v|>",
    "<|lvg|>",
)

#: mask schedules upstream ``get_mask_schedule`` knows
_SCHEDULE = re.compile(r"^(cosine|linear|sigmoid|pow\d+(\.\d+)?)$")


class MMaDA(CheckoutBackbone):
    """MMaDA-8B-MixCoT (discrete diffusion LLM) with the MAGVIT-v2 image tokenizer: text + image."""

    name = "mmada"
    version = "1"
    produces = frozenset({"text", "image"})
    reads = ("current_image", "current_text", "metadata", "conditions")
    default_batch_size = 1
    description = "MMaDA-8B-MixCoT + MAGVIT-v2: next-page narration and illustration (T+I)"
    requirements: ClassVar[tuple[str, ...]] = MMADA_REQUIREMENTS
    checkout = CHECKOUT
    pin_note = " (the official runner's pin)"
    # null (as for every number here) = the default
    parameters = (
        CHECKOUT.declaration(
            f"checkout of Gen-Verse/MMaDA at {PINNED_COMMIT} (required; the key hashes its code)"
        ),
        Param(
            "model",
            str,
            "Gen-Verse/MMaDA-8B-MixCoT",
            "hub id or directory (weights+tokenizer)",
            weights=True,
        ),
        Param("revision", str, None, "hub revision of the model; null: default branch"),
        Param("vq_model", str, "showlab/magvitv2", "the MAGVIT-v2 image tokenizer", weights=True),
        Param("vq_revision", str, None, "hub revision of vq_model"),
        Param("dtype", str, "auto", "auto: bfloat16 on a GPU, float32 on the CPU (official)"),
        Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
        Param("resolution", (int, None), 512, "side the current page is cropped to", ge=1),
        Param("max_text_len", (int, None), 1024, "text slots of the T2I prompt", ge=1),
        Param("mmu_max_new_tokens", (int, None), 512, "understanding: new tokens", ge=1),
        Param("mmu_steps", (int, None), 256, "understanding: denoising steps", ge=1),
        Param("mmu_block_length", (int, None), 128, "understanding: block length", ge=1),
        Param("t2i_guidance_scale", (float, None), 1.5, "image: guidance (demo config)", ge=0),
        Param("t2i_timesteps", (int, None), 12, "image: generation timesteps", ge=1),
        Param("t2i_temperature", (float, None), 1.0, "image: temperature", ge=0),
        Param("t2i_noise_type", str, "mask", "passed to t2i_generate (ignored upstream)"),
        Param("t2i_mask_schedule", str, "cosine", "cosine | linear | sigmoid | pow<N>"),
    )
    defaults: ClassVar[dict[str, Any]] = {p.name: p.default for p in parameters}

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.model: Any = None
        self.vq_model: Any = None
        self.prompting: Any = None
        self.device: str | None = None

    @classmethod
    def check(cls, params: dict[str, Any]) -> dict[str, Any]:
        """The settings from the declared parameters (keys and types are checked by the
        declaration): defaults filled in, spellings normalised, rules across keys checked; a
        :class:`SettingsError` names the first bad one."""
        owner = f"backbone={cls.name}"
        s: dict[str, Any] = {}
        for key in ("model", "vq_model"):
            value = setting(params, cls.defaults, key)
            if not isinstance(value, str) or not value.strip():
                raise SettingsError(
                    f"{owner}: {key} must be a hub id or a local path, got {value!r}"
                )
            s[key] = value
        for key in ("revision", "vq_revision"):
            value = params.get(key)
            if value is not None and not isinstance(value, str):
                raise SettingsError(f"{owner}: {key} must be a string, got {value!r}")
            s[key] = value
        dtype = str(setting(params, cls.defaults, "dtype")).lower()
        if dtype not in DTYPE_NAMES:
            raise SettingsError(
                f"{owner}: dtype must be one of {', '.join(DTYPE_NAMES)}, got {dtype!r}"
            )
        s["dtype"] = DTYPE_NAMES[dtype]
        s["device"] = str(setting(params, cls.defaults, "device")).strip() or "auto"
        for key in (
            "resolution",
            "max_text_len",
            "mmu_max_new_tokens",
            "mmu_steps",
            "mmu_block_length",
            "t2i_timesteps",
        ):
            s[key] = positive_int(owner, key, setting(params, cls.defaults, key))
        # mmu_generate decodes max_new_tokens in blocks of block_length, the steps split evenly
        blocks, rest = divmod(s["mmu_max_new_tokens"], s["mmu_block_length"])
        if rest:
            raise SettingsError(
                f"{owner}: mmu_max_new_tokens ({s['mmu_max_new_tokens']}) must be "
                f"a multiple of mmu_block_length ({s['mmu_block_length']})"
            )
        if s["mmu_steps"] % blocks:
            raise SettingsError(
                f"{owner}: mmu_steps ({s['mmu_steps']}) must be a multiple of "
                f"the number of blocks ({blocks} = mmu_max_new_tokens / "
                "mmu_block_length)"
            )
        for key in ("t2i_guidance_scale", "t2i_temperature"):
            s[key] = non_negative_float(owner, key, setting(params, cls.defaults, key))
        noise = setting(params, cls.defaults, "t2i_noise_type")
        if not isinstance(noise, str) or not noise.strip():
            raise SettingsError(f"{owner}: t2i_noise_type must be a string, got {noise!r}")
        s["t2i_noise_type"] = noise
        schedule = setting(params, cls.defaults, "t2i_mask_schedule")
        if not isinstance(schedule, str) or not _SCHEDULE.match(schedule):
            raise SettingsError(
                f"{owner}: t2i_mask_schedule must be cosine, linear, sigmoid or "
                f"pow<N>, got {schedule!r}"
            )
        s["t2i_mask_schedule"] = schedule
        seed = params.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise SettingsError(f"{owner}: seed must be an integer, got {seed!r}")
        s["seed"] = seed
        return s

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        """Hub ids ``prefetch`` downloads: the model (weights and tokenizer) and the VQ model."""
        return [
            str(params.get("model") or cls.defaults["model"]),
            str(params.get("vq_model") or cls.defaults["vq_model"]),
        ]

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Import MMaDA's code from the checkout, then load the tokenizer, MAGVIT-v2 and MMaDA the
        way the upstream inference scripts do."""
        s = self.settings
        self.warn_if_unpinned()
        upstream = self.import_checkout(import_upstream)
        from transformers import AutoTokenizer

        try:
            device = resolve_device(s["device"])
        except SettingsError as exc:
            raise ComponentError(f"backbone=mmada: {exc}") from None
        # auto: bfloat16 on a GPU, float32 on the CPU (the official runner's choice)
        dtype = resolve_dtype(s["dtype"], device)
        try:
            tokenizer = AutoTokenizer.from_pretrained(
                s["model"],
                padding_side="left",
                trust_remote_code=True,
                **_revision(s["revision"]),
            )
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            prompting = upstream.UniversalPrompting(
                tokenizer,
                max_text_len=s["max_text_len"],
                special_tokens=SPECIAL_TOKENS,
                ignore_id=-100,
                cond_dropout_prob=0.0,
                use_reserved_token=True,
            )
            vq_model = upstream.MAGVITv2.from_pretrained(
                s["vq_model"], **_revision(s["vq_revision"])
            )
            vq_model = vq_model.to(device)
            vq_model.eval()
            vq_model.requires_grad_(False)
            model = upstream.MMadaModelLM.from_pretrained(
                s["model"],
                trust_remote_code=True,
                torch_dtype=dtype,
                **_revision(s["revision"]),
            ).to(device)
            model.eval()
        except Exception as exc:
            raise ComponentError(
                f"backbone=mmada: cannot load {s['model']!r} / "
                f"{s['vq_model']!r}: {type(exc).__name__}: {exc}"
            ) from exc
        self.upstream, self.prompting = upstream, prompting
        self.vq_model, self.model, self.device = vq_model, model, device

    def unload(self) -> None:
        self.model = self.vq_model = self.prompting = None
        release_cuda_memory()

    # -- calls -----------------------------------------------------------------------------
    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        if self.model is None:
            self.load()
        messages = mmu_messages(
            item.get("metadata"), item.get("current_text") or "", item.get("conditions")
        )
        answer, prompt_tokens = self.understand(item["current_image"].open_image(), messages)
        page = interpret(answer)  # raises: the whole example is lost, as in the official runner
        prompt = t2i_prompt(page.t2i)
        usage: dict[str, Any] = {
            "passes": 2,
            "mmu_prompt_tokens": prompt_tokens,
            "answer": answer,
            "t2i_prompt": prompt,
            "repairs": page.repairs,
        }
        self.record_revision(usage)
        out = BackboneOutput(text=page.text, plan={"speech": page.speech}, usage=usage)
        try:
            image = self.draw(prompt)
        except Exception as exc:  # the narration and the speech plan survive
            release_cuda_memory()
            out.failures["image"] = exception_failure(exc)
        else:
            if isinstance(image, Failure):
                out.failures["image"] = image
            else:
                out.image = image
        return out

    def understand(self, image: Any, messages: list[dict[str, str]]) -> tuple[str, int]:
        """The MMU pass: (decoded answer, prompt length in tokens)."""
        import torch

        s, prompting = self.settings, self.prompting
        tokenizer = prompting.text_tokenizer
        with torch.no_grad():
            pixels = self.upstream.image_transform(image, resolution=s["resolution"])
            pixels = pixels.to(self.device).unsqueeze(0)
            codes = self.vq_model.get_code(pixels).to(self.device) + len(tokenizer)
            chat = tokenizer.apply_chat_template(
                messages, tokenize=True, add_generation_prompt=True, return_tensors="pt"
            )
            if not torch.is_tensor(chat):  # transformers >= 5 returns a BatchEncoding
                chat = chat["input_ids"]
            rows = codes.shape[0]

            def token(name: str):
                return torch.full((rows, 1), int(prompting.sptids_dict[name]), device=self.device)

            input_ids = torch.cat(
                [token("<|mmu|>"), token("<|soi|>"), codes, token("<|eoi|>"), chat.to(self.device)],
                dim=1,
            ).long()
            kwargs = {
                "max_new_tokens": s["mmu_max_new_tokens"],
                "steps": s["mmu_steps"],
                "block_length": s["mmu_block_length"],
            }
            if self.device.startswith("cuda"):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    output = self.model.mmu_generate(input_ids, **kwargs)
            else:
                output = self.model.mmu_generate(input_ids, **kwargs)
            answer = tokenizer.batch_decode(
                output[:, input_ids.shape[1] :],
                skip_special_tokens=True,
                clean_up_tokenization_spaces=False,
            )[0]
        return answer.strip(), int(input_ids.shape[1])

    def draw(self, prompt: str) -> Any:
        """The T2I pass: a PIL image, or a :class:`Failure` for a non-finite decode."""
        import numpy as np
        import torch
        from PIL import Image

        s, model, prompting = self.settings, self.model, self.prompting
        config = model.config
        num_vq_tokens = int(getattr(config, "num_vq_tokens", 1024))
        codebook_size = int(getattr(config, "codebook_size", 8192))
        schedule = self.upstream.get_mask_schedule(s["t2i_mask_schedule"])
        generator = torch.Generator(device=self.device).manual_seed(item_seed(s["seed"], prompt))
        with torch.no_grad():
            masked = torch.full(
                (1, num_vq_tokens), int(config.mask_token_id), dtype=torch.long, device=self.device
            )
            input_ids, attention_mask = prompting(([prompt], masked), "t2i_gen")
            uncond_ids = uncond_mask = None
            if s["t2i_guidance_scale"] > 0:
                uncond_ids, uncond_mask = prompting(([""], masked), "t2i_gen")
                uncond_ids, uncond_mask = uncond_ids.to(self.device), uncond_mask.to(self.device)
            codes = model.t2i_generate(
                input_ids=input_ids.to(self.device),
                uncond_input_ids=uncond_ids,
                attention_mask=attention_mask.to(self.device),
                uncond_attention_mask=uncond_mask,
                guidance_scale=s["t2i_guidance_scale"],
                temperature=s["t2i_temperature"],
                timesteps=s["t2i_timesteps"],
                noise_schedule=schedule,
                noise_type=s["t2i_noise_type"],
                seq_len=num_vq_tokens,
                uni_prompting=prompting,
                generator=generator,
            )
            codes = torch.clamp(codes, min=0, max=codebook_size - 1)
            pixels = self.vq_model.decode_code(codes)
            pixels = torch.clamp((pixels.float() + 1.0) / 2.0, min=0.0, max=1.0)
        array = pixels[0].permute(1, 2, 0).cpu().numpy()
        if not np.isfinite(array).all():
            return Failure("empty_output", "non-finite pixel values in the decoded image")
        return Image.fromarray((array * 255.0).astype(np.uint8))


def _revision(revision: str | None) -> dict[str, str]:
    return {"revision": revision} if revision else {}


__all__ = ["MMADA_REQUIREMENTS", "SPECIAL_TOKENS", "MMaDA"]
