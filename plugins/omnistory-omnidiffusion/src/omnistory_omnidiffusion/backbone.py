"""Omni-Diffusion as an any-to-any backbone (``backbone=omnidiffusion``).

One ``run_one`` is the official Omni-StoryBench runner's sequence for one example (one cached
record), every pass a masked-diffusion ``generate`` of the Dream-based model:

1. planning: the current page (resized and centre-cropped to 512 px, MAGVIT-v2 codes as image
   tokens) after a prompt asking for NARRATION / SPEAKER / SPEECH / IMAGE_PROMPT lines from the
   current text, the book metadata and the next-page condition
   (:mod:`omnistory_omnidiffusion.prompts`);
   1b. when the answer has no SPEECH line, one more, shorter planning pass for it;
2. text-to-image: Omni-Diffusion's T2I instruction and a description assembled from the plan and the
   story inputs; the 256 image tokens it writes are decoded by MAGVIT-v2;
3. text-to-speech: its TTS instruction and the spoken line; the audio tokens are decoded by the
   GLM-4-Voice flow-matching + HiFT decoder to a 22,050 Hz waveform.

The model is remote code in the hub checkpoint; the MAGVIT-v2 class, the image transform and the
speech decoder come from a git checkout of VITA-MLLM/Omni-Diffusion (``source_dir``, see
:mod:`omnistory_omnidiffusion.source`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from omnistory_core.api import (
    Audio,
    BackboneOutput,
    ComponentError,
    Failure,
    SettingsError,
)
from omnistory_core.kit.checkout import CheckoutBackbone
from omnistory_core.kit.diffusion import (
    release_cuda_memory,
    resolve_device,
    resolve_dtype,
)
from omnistory_omnidiffusion import prompts
from omnistory_omnidiffusion.prompts import Story
from omnistory_omnidiffusion.settings import (
    DEFAULTS,
    PARAMETERS,
    PASSES,
    check_settings,
    checkpoints,
)
from omnistory_omnidiffusion.source import CHECKOUT, check_source_dir, import_upstream

#: the GLM-4-Voice decoder's output rate (its HiFT vocoder; the official runner writes this rate)
SAMPLE_RATE = 22050

#: the inference subset of the official environment (Omni-Diffusion's requirements_ds_gpu.txt,
#: which pins transformers==4.51.3, plus what the imported modules of the checkout and the
#: checkpoint's remote code import).  torch: the closest release to the authors' container
#: (NGC PyTorch 24.11, torch 2.6.0a0).  diffusers is unpinned upstream; MAGVIT-v2's loader is copied
#: from MMaDA, whose environment pins 0.32.2.  numpy < 2 as in that container.  Not verified here.
OMNIDIFFUSION_REQUIREMENTS: tuple[str, ...] = (
    "torch==2.6.0",
    "torchvision==0.21.0",
    "torchaudio==2.6.0",
    "transformers==4.51.3",
    "accelerate>=1.1.1",
    "diffusers==0.32.2",
    "deepspeed",
    "funasr",
    "datasets",
    "decord",
    "natsort",
    "xlsxwriter",
    "tabulate",
    "termcolor",
    "einops",
    "jaxtyping",
    "typeguard",
    "omegaconf",
    "hydra-core",
    "HyperPyYAML",
    "conformer",
    "lightning",
    "rich",
    "gdown",
    "wget",
    "matplotlib",
    "scipy",
    "soundfile",
    "pyyaml",
    "regex",
    "safetensors",
    "numpy<2",
    "pillow",
)


def _dtype_keyword() -> str:
    """``from_pretrained``'s dtype keyword: ``dtype`` from transformers 4.56 on, ``torch_dtype``
    before (the official environment's 4.51.3)."""
    import transformers

    major, minor = (int(part) for part in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def local_directory(name: str, revision: str | None) -> Path:
    """A local directory, or the hub snapshot of ``name`` (the speech decoder and MAGVIT-v2 are
    read from files, as the official runner reads its local copies)."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo_id=name, revision=revision))


def seed_everything(seed: int) -> None:
    """What the official runner does once, when it loads the model."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


class OmniDiffusion(CheckoutBackbone):
    """Omni-Diffusion (8B masked discrete diffusion, Dream-based) with MAGVIT-v2 and the GLM-4-Voice
    decoder: narration, illustration and speech."""

    name = "omnidiffusion"
    version = "1"
    produces = frozenset({"text", "image", "speech"})
    reads = ("current_image", "current_text", "metadata", "conditions")
    parameters = PARAMETERS
    default_batch_size = 1
    description = "Omni-Diffusion (masked diffusion, any-to-any): narration, illustration, speech"
    requirements: ClassVar[tuple[str, ...]] = OMNIDIFFUSION_REQUIREMENTS
    defaults: ClassVar[dict[str, Any]] = DEFAULTS
    checkout = CHECKOUT
    pin_note = " (the commit this plugin was written against)"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.model: Any = None
        self.tokenizer: Any = None
        self.magvit: Any = None
        self.decoder: Any = None
        self.device: str | None = None
        self.audio_0 = self.image_0 = -1
        self._torch: Any = None

    @classmethod
    def check(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        return check_settings(params)

    @classmethod
    def check_source_dir(cls, value: Any) -> Path:
        return check_source_dir(value)  # the source module's, with its submodule hint

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        return checkpoints(params)

    def unkeyed_settings(self) -> set[str]:
        """Besides the runtime settings, the run's ``seed`` when ``load_seed`` fixes the seed (it
        then changes nothing)."""
        skip = super().unkeyed_settings()
        if self.settings["load_seed"] is not None:
            skip.add("seed")
        return skip

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Seed, import the checkout's glue, then load the tokenizer and model (remote code),
        MAGVIT-v2 and the GLM-4-Voice decoder."""
        s = self.settings
        self.warn_if_unpinned()
        try:
            device = resolve_device(s["device"])
        except SettingsError as exc:
            raise ComponentError(f"backbone=omnidiffusion: {exc}") from None
        seed_everything(s["seed"] if s["load_seed"] is None else s["load_seed"])
        upstream = self.import_checkout(import_upstream)
        import torch
        from transformers import AutoModel, AutoTokenizer

        dtype = resolve_dtype(s["dtype"], device)
        revision = {"revision": s["revision"]} if s["revision"] else {}
        stage = f"the model {s['model']!r}"
        try:
            tokenizer = AutoTokenizer.from_pretrained(
                s["model"], trust_remote_code=True, **revision
            )
            kwargs: dict[str, Any] = {
                "trust_remote_code": True,
                _dtype_keyword(): dtype,
                **revision,
            }
            if s["attn_implementation"]:
                kwargs["attn_implementation"] = s["attn_implementation"]
            if device != "cpu":
                kwargs["device_map"] = device
            model = AutoModel.from_pretrained(s["model"], **kwargs)
            if "device_map" not in kwargs:
                model = model.to(device)
            model = model.eval()
            stage = f"MAGVIT-v2 {s['image_tokenizer']!r}"
            magvit_dir = local_directory(s["image_tokenizer"], s["image_tokenizer_revision"])
            magvit = upstream.MAGVITv2.from_pretrained(str(magvit_dir), low_cpu_mem_usage=False)
            magvit = magvit.to(device)
            magvit.eval()
            magvit.requires_grad_(False)
            stage = f"the GLM-4-Voice decoder {s['audio_decoder']!r}"
            decoder_dir = local_directory(s["audio_decoder"], s["audio_decoder_revision"])
            decoder = upstream.AudioDecoder(
                config_path=str(decoder_dir / "config.yaml"),
                flow_ckpt_path=str(decoder_dir / "flow.pt"),
                hift_ckpt_path=str(decoder_dir / "hift.pt"),
                device=device,
            )
        except Exception as exc:
            raise ComponentError(
                f"backbone=omnidiffusion: cannot load {stage}: {type(exc).__name__}: {exc}"
            ) from exc
        audio_0 = tokenizer.convert_tokens_to_ids(prompts.AUDIO_CODE_0)
        image_0 = tokenizer.convert_tokens_to_ids(prompts.IMAGE_CODE_0)
        unknown = tokenizer.unk_token_id
        if (
            not isinstance(audio_0, int)
            or not isinstance(image_0, int)
            or audio_0 in (None, unknown)
            or image_0 in (None, unknown)
            or image_0 <= audio_0
        ):
            raise ComponentError(
                f"backbone=omnidiffusion: the tokenizer of {s['model']!r} has no Omni-Diffusion "
                f"audio/image vocabulary ({prompts.AUDIO_CODE_0} -> {audio_0}, "
                f"{prompts.IMAGE_CODE_0} -> {image_0})"
            )
        self.upstream, self.tokenizer, self.model = upstream, tokenizer, model
        self.magvit, self.decoder, self.device = magvit, decoder, device
        self.audio_0, self.image_0 = audio_0, image_0
        self._torch = torch

    def unload(self) -> None:
        self.model = self.tokenizer = self.magvit = self.decoder = self.upstream = None
        release_cuda_memory()

    # -- calls -----------------------------------------------------------------------------
    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        """The three stages; an exception loses the whole example (as the official runner, which
        stages all three outputs and publishes them together)."""
        if self.model is None:
            self.load()
        try:
            return self._run(item)
        except ComponentError:
            raise
        except Exception as exc:
            if self.device and self.device.startswith("cuda"):
                release_cuda_memory()
            raise ComponentError(f"backbone=omnidiffusion: {type(exc).__name__}: {exc}") from exc

    def _run(self, item: dict[str, Any]) -> BackboneOutput:
        s = self.settings
        official = s["fallbacks"] == "official"
        story = Story.from_item(item)
        page_codes = self.encode_image(item["current_image"].path)
        usage: dict[str, Any] = {"passes": 0, "prompt_tokens": {}, "fallbacks": []}
        failures: dict[str, Failure] = {}

        # 1. planning
        raw = self.generate(
            "plan", prompts.with_image(prompts.planning_prompt(story), page_codes), usage
        ).text
        parsed = prompts.parse_answer(raw)
        plan = dict(parsed)
        if not plan["narration"] and official:
            plan["narration"] = prompts.clean(
                story.conditions.get("text_instruction")
            ) or prompts.clean(raw)
            usage["fallbacks"].append("narration")
            if not plan["narration"]:
                raise ComponentError(
                    "backbone=omnidiffusion: the planning pass wrote no NARRATION line and there "
                    "is no text goal or raw output to fall back on",
                    category="plan_missing_field",
                )
        # 1b. one recovery pass for a missing spoken line
        recovery_raw = None
        if not plan["speech"]:
            message = prompts.with_image(
                prompts.recovery_prompt(story, plan["narration"]), page_codes
            )
            recovery_raw = self.generate("recovery", message, usage).text
            recovered = prompts.parse_answer(recovery_raw)
            plan["speaker"] = plan["speaker"] or recovered["speaker"]
            plan["speech"] = plan["speech"] or recovered["speech"]
        if official:
            for key, fallback in (
                ("speaker", prompts.FALLBACK_SPEAKER),
                ("speech", prompts.FALLBACK_SPEECH),
            ):
                if not plan[key]:
                    plan[key] = fallback
                    usage["fallbacks"].append(key)
            if not plan["image_prompt"]:
                # the official runner synthesises it from the same pieces as the T2I prompt
                plan["image_prompt"] = prompts.image_description(story, "", plan["narration"])
                usage["fallbacks"].append("image_prompt")

        # 2. text-to-image
        description = prompts.image_description(story, plan["image_prompt"], plan["narration"])
        drawn = self.generate("image", prompts.t2i_message(description), usage)
        usage["image_codes"] = len(drawn.image_codes)
        grid = prompts.image_grid(drawn.image_codes)
        image = None
        if grid is None:
            failures["image"] = Failure(
                "backbone_no_image", "the text-to-image pass wrote no image tokens"
            )
        else:
            image = self.decode_image(grid)

        # 3. text-to-speech
        speech = None
        if not plan["speech"]:
            failures["speech"] = Failure(
                "plan_missing_field",
                "no SPEECH line in the planning answer nor in the recovery answer (fallbacks=none)",
            )
        else:
            spoken = self.generate("speech", prompts.tts_message(plan["speech"]), usage)
            usage["audio_codes"] = len(spoken.audio_codes)
            if not spoken.audio_codes:
                failures["speech"] = Failure(
                    "backbone_no_speech", "the text-to-speech pass wrote no audio tokens"
                )
            else:
                speech = self.decode_speech(spoken.audio_codes)

        text = plan["narration"] or None
        if text is None:
            failures["text"] = Failure(
                "plan_missing_field", "no NARRATION line in the planning answer (fallbacks=none)"
            )
        self.record_revision(usage)
        record = {
            **plan,
            "parsed": parsed,
            "raw": raw,
            "recovery_raw": recovery_raw,
            "t2i_prompt": description,
            "fallbacks": list(usage["fallbacks"]),
        }
        return BackboneOutput(
            text=text, image=image, speech=speech, plan=record, failures=failures, usage=usage
        )

    # -- model passes ----------------------------------------------------------------------
    def generate(self, stage: str, message: str, usage: dict[str, Any]) -> prompts.Generated:
        """One masked-diffusion pass with the settings of ``stage`` (plan, recovery, image or
        speech), as the official ``run_infer`` calls ``model.generate``; the new tokens split by
        modality, the text decoded without special tokens."""
        torch = self._torch
        s = self.settings
        max_key, steps_key, alg_key, penalty_key = PASSES[stage]
        ids = self.tokenizer(prompts.chat(message), add_special_tokens=False)["input_ids"]
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        task = {"image": "T2I", "speech": "TTS"}.get(stage, "")
        with torch.no_grad():
            result = self.model.generate(
                input_ids,
                audios=None,
                audio_indices=None,
                temperature=s["temperature"],
                top_p=s["top_p"],
                steps=s[steps_key],
                max_new_tokens=s[max_key],
                alg=s[alg_key],
                cfg=s["image_cfg"] if stage == "image" else 0.0,
                tokenizer=self.tokenizer,
                add_boa_token=0,
                max_position_penalty=s["image_position_penalty"] if stage == "image" else 1.0,
                repeat_penalty=s[penalty_key],
                output_text_only=False,
                task=task,
            )
        sequences = result[0] if isinstance(result, tuple | list) else result
        new = sequences[0][len(ids) :].tolist()
        out = prompts.split_generated(new, self.audio_0, self.image_0)
        out.text = self.tokenizer.decode(out.text_ids, skip_special_tokens=True)
        usage["passes"] += 1
        usage["prompt_tokens"][stage] = len(ids)
        return out

    def encode_image(self, path: str) -> list[int]:
        """MAGVIT-v2 codes of the current page, transformed as the official image processor does
        (shorter side to ``input_resolution``, centre crop, [-1, 1])."""
        from PIL import Image

        torch = self._torch
        with Image.open(path) as image:
            image = image.convert("RGB")
        pixels = self.upstream.image_transform(image, resolution=self.settings["input_resolution"])
        with torch.no_grad():
            codes = self.magvit.get_code(pixels.unsqueeze(0).float().to(self.device))
        return [int(code) for code in codes[0].tolist()]

    def decode_image(self, grid: list[int]) -> Any:
        """256 codes -> an RGB picture (MAGVIT-v2 decode, [-1, 1] -> 0..255, truncated as the
        official runner converts)."""
        import numpy as np
        from PIL import Image

        torch = self._torch
        codes = torch.tensor([grid], dtype=torch.long, device=self.device)
        with torch.no_grad():
            pixels = self.magvit.decode_code(codes)
        pixels = torch.clamp((pixels.float() + 1.0) / 2.0, min=0.0, max=1.0) * 255.0
        array = pixels.permute(0, 2, 3, 1).cpu().numpy().astype(np.uint8)[0]
        return Image.fromarray(array).convert("RGB")

    def decode_speech(self, codes: list[int]) -> Audio:
        """Audio codes -> a 22,050 Hz waveform through the GLM-4-Voice decoder, with the empty
        voice prompt the official tokenizer wrapper passes."""
        import numpy as np

        torch = self._torch
        with torch.no_grad():
            tokens = torch.tensor(codes, device=self.device).unsqueeze(0)
            speech, _mel = self.decoder.token2wav(
                tokens,
                uuid="omnistory",
                prompt_token=torch.zeros(1, 0, dtype=torch.int64, device=self.device),
                prompt_feat=torch.zeros(1, 0, 80, device=self.device),
                finalize=True,
                option_steps=self.settings["flow_steps"],
            )
        samples = speech.squeeze().detach().cpu().float().numpy()
        if samples.ndim != 1 or samples.size == 0 or not np.isfinite(samples).all():
            raise ComponentError(
                f"backbone=omnidiffusion: the speech decoder returned an unusable waveform "
                f"(shape {tuple(samples.shape)})"
            )
        return Audio(samples=samples.astype(np.float32), sample_rate=SAMPLE_RATE)


BACKBONES = (OmniDiffusion,)
