"""AnyGPT-chat as an any-to-any backbone (``backbone=anygpt``).

One ``run_one`` = the benchmark runner's work for one example (one cached record): the current page
is turned into SEED image tokens once (224 px), then the chat model is asked three times
(:mod:`omnistory_anygpt.prompts`):

1. text -- image tokens + instruction, answer started with ``Narration:``; the answer gives the
   narration and a spoken line (:func:`omnistory_anygpt.parsing.parse_text_answer`);
2. image -- image tokens + instruction, ``<soim>`` forced; every ``<soim>...<eoim>`` run is decoded
   by the SEED tokenizer's unCLIP (Stable Diffusion 2.1) decoder, the first one is the page;
3. speech -- text-only instruction, ``<sosp>`` forced; every ``<sosp>...<eosp>`` run (semantic
   codes) is completed by SoundStorm and decoded by SpeechTokenizer, the first one is the speech.

Failures are per modality, as in the runner: an answer without an image (speech) run fails that
modality only (``backbone_no_image`` / ``backbone_no_speech``); an exception in a pass fails that
pass's modality (``model_error``) and leaves the later passes unmade (``upstream_failed``), while
what the earlier passes made is kept.  AnyGPT's code comes from a checkout of its repository
(``source_dir``, see :mod:`omnistory_anygpt.source`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from omnistory_anygpt import prompts as P
from omnistory_anygpt.parsing import (
    ASSISTANT_TAG,
    PARSE_MODES,
    assistant_payload,
    media_segments,
    media_tags,
    parse_text_answer,
    segment_codes,
)
from omnistory_anygpt.source import CHECKOUT, import_upstream
from omnistory_core.api import (
    Audio,
    BackboneOutput,
    ComponentError,
    Failure,
    Param,
    SettingsError,
)
from omnistory_core.kit.checkout import CheckoutBackbone
from omnistory_core.kit.diffusion import (
    boolean,
    exception_failure,
    item_seed,
    non_negative_float,
    positive_int,
    release_cuda_memory,
    resolve_device,
    setting,
)

#: AnyGPT's environment: the inference subset of the repository's requirements.txt with its pins
#: (torch 2.1.0, transformers 4.34.1, diffusers 0.20.2), plus what newer releases broke since:
#: diffusers 0.20.2 imports ``huggingface_hub.cached_download`` (gone in 0.26) and torch 2.1 wheels
#: are built against numpy 1.x.  Needs Python 3.10 or 3.11 (see README).
ANYGPT_REQUIREMENTS: tuple[str, ...] = (
    "torch==2.1.0",
    "torchaudio==2.1.0",
    "torchvision==0.16.0",
    "transformers==4.34.1",
    "diffusers==0.20.2",
    "huggingface_hub>=0.16.4,<0.26",
    "accelerate>=0.20.3,<1.0",
    "speechtokenizer==0.1.2",
    "scipy==1.11.4",
    "numpy>=1.24,<2",
    "sentencepiece",
    "einops",
    "beartype==0.16.4",
    "lion-pytorch",
    "timm>=0.9,<1.0",
    "soundfile==0.12.1",
)

#: torch dtype names accepted by ``dtype``
DTYPES = {
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}
#: the hub repository SEED's Q-Former initialises its text side from (downloaded at load)
SEED_QFORMER_BERT = "bert-base-uncased"
#: the passes of one example, in order, and the modality each one makes
PASSES: tuple[tuple[str, str], ...] = (
    ("encode", "text"),
    ("text", "text"),
    ("image", "image"),
    ("speech", "speech"),
)


class AnyGPT(CheckoutBackbone):
    """AnyGPT-chat (LLaMA-2 7B, discrete image/speech/music tokens): text, image and speech."""

    name = "anygpt"
    version = "1"
    produces = frozenset({"text", "image", "speech"})
    reads = ("current_image", "current_text", "metadata", "conditions")
    default_batch_size = 1
    description = "AnyGPT-chat + SEED tokenizer/unCLIP + SpeechTokenizer/SoundStorm (any-to-any)"
    requirements: ClassVar[tuple[str, ...]] = ANYGPT_REQUIREMENTS
    checkout = CHECKOUT
    environment_hint = (
        "run the backbone in AnyGPT's environment (backbone.runner.python=<that venv>/bin/python,"
        " see the plugin README)"
    )
    # null (as for every number here) = the default
    parameters = (
        CHECKOUT.declaration(),
        Param(
            "model",
            str,
            "fnlp/AnyGPT-chat",
            "the chat model: hub id or local directory",
            weights=True,
        ),
        Param("image_tokenizer", str, "AILab-CVC/seed-tokenizer-2", "SEED tokenizer-2 (or .pt)"),
        Param("image_tokenizer_file", str, "seed_quantizer.pt", "quantizer in image_tokenizer"),
        Param(
            "image_decoder",
            str,
            "sd2-community/stable-diffusion-2-1-unclip",
            "SD 2.1 unCLIP, SEED codes -> pixels (the runner's mirror)",
        ),
        Param("speech_modules", str, "fnlp/AnyGPT-speech-modules", "SpeechTokenizer + SoundStorm"),
        Param(
            "speech_tokenizer_checkpoint",
            str,
            "speechtokenizer/ckpt.dev",
            "relative to speech_modules (or absolute)",
        ),
        Param(
            "speech_tokenizer_config",
            str,
            "speechtokenizer/config.json",
            "relative to speech_modules (or absolute)",
        ),
        Param(
            "soundstorm_checkpoint",
            str,
            "soundstorm/speechtokenizer_soundstorm_mls.pt",
            "relative to speech_modules (or absolute)",
        ),
        Param("dtype", str, "float16", "float16 as upstream"),
        Param("device", str, "auto", "auto: cuda when visible, else cpu", runtime=True),
        Param("image_size", (int, None), 224, "side the current page is resized to", ge=1),
        Param("do_sample", bool, True, "sampling in all three passes"),
        Param("temperature", (float, None), 1.0, "sampling temperature", gt=0),
        Param("top_p", (float, None), 1.0, "nucleus sampling", gt=0, le=1),
        Param("min_new_tokens", (int, None), 10, "every pass", ge=1),
        Param("text_max_new_tokens", (int, None), 100, "text pass budget (no stop token)", ge=1),
        Param("image_max_new_tokens", (int, None), 200, "image pass budget", ge=1),
        Param("speech_max_new_tokens", (int, None), 1500, "speech pass budget", ge=1),
        Param("speech_repetition_penalty", (float, None), 1.05, "speech pass only", gt=0),
        Param("image_guidance_scale", (float, None), 10.0, "unCLIP decoding guidance", ge=0),
        Param("image_decode_steps", (int, None), 20, "unCLIP denoising steps", ge=1),
        Param("soundstorm_steps", (int, None), 3, "SoundStorm steps (the runner's vc_steps)", ge=1),
        Param(
            "parsing",
            str,
            "official",
            "official (whitespace collapsed, as the runner) | lines (labels on their own lines)",
            choices=PARSE_MODES,
        ),
    )
    defaults: ClassVar[dict[str, Any]] = {p.name: p.default for p in parameters}

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.model: Any = None
        self.tokenizer: Any = None
        self.image_tokenizer: Any = None
        self.speech_tokenizer: Any = None
        self.soundstorm: Any = None
        self.device: str | None = None
        self.tags: dict[str, tuple[str, str]] = {}

    # -- parameters --------------------------------------------------------------------------
    @classmethod
    def check(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        """The settings from the declared parameters (keys and types are checked by the
        declaration): defaults filled in, spellings normalised; a :class:`SettingsError` names the
        first bad one."""
        owner = f"backbone={cls.name}"
        s: dict[str, Any] = {}
        for key in (
            "model",
            "image_tokenizer",
            "image_tokenizer_file",
            "image_decoder",
            "speech_modules",
            "speech_tokenizer_checkpoint",
            "speech_tokenizer_config",
            "soundstorm_checkpoint",
        ):
            value = setting(params, cls.defaults, key)
            if not isinstance(value, str) or not value.strip():
                raise SettingsError(f"{owner}: {key} must be a hub id or a path, got {value!r}")
            s[key] = value
        dtype = str(setting(params, cls.defaults, "dtype")).lower()
        if dtype not in DTYPES:
            raise SettingsError(f"{owner}: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        s["dtype"] = DTYPES[dtype]
        s["device"] = str(setting(params, cls.defaults, "device")).strip() or "auto"
        for key in (
            "image_size",
            "min_new_tokens",
            "text_max_new_tokens",
            "image_max_new_tokens",
            "speech_max_new_tokens",
            "image_decode_steps",
            "soundstorm_steps",
        ):
            s[key] = positive_int(owner, key, setting(params, cls.defaults, key))
        s["do_sample"] = boolean(owner, "do_sample", setting(params, cls.defaults, "do_sample"))
        for key in ("temperature", "speech_repetition_penalty", "image_guidance_scale"):
            s[key] = non_negative_float(owner, key, setting(params, cls.defaults, key))
        if s["temperature"] <= 0:
            raise SettingsError(f"{owner}: temperature must be positive, got {s['temperature']}")
        if s["speech_repetition_penalty"] <= 0:
            raise SettingsError(
                f"{owner}: speech_repetition_penalty must be positive, "
                f"got {s['speech_repetition_penalty']}"
            )
        top_p = non_negative_float(owner, "top_p", setting(params, cls.defaults, "top_p"))
        if not 0 < top_p <= 1:
            raise SettingsError(f"{owner}: top_p must be in (0, 1], got {top_p}")
        s["top_p"] = top_p
        parsing = setting(params, cls.defaults, "parsing")
        if parsing not in PARSE_MODES:
            raise SettingsError(
                f"{owner}: parsing must be one of {', '.join(PARSE_MODES)}, got {parsing!r}"
            )
        s["parsing"] = parsing
        seed = params.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise SettingsError(f"{owner}: seed must be an integer, got {seed!r}")
        s["seed"] = seed
        return s

    @classmethod
    def checkpoints(cls, params: Mapping[str, Any]) -> list[str]:
        """Hub ids ``prefetch`` downloads (local paths are skipped there)."""
        return [
            str(params.get(key) or cls.defaults[key])
            for key in ("model", "image_tokenizer", "image_decoder", "speech_modules")
        ] + [SEED_QFORMER_BERT]

    def generation_settings(self, modality: str) -> dict[str, Any]:
        """The ``GenerationConfig`` of one pass: the runner's ``config/*_generate_config.json``
        (text/image/speech) -- sampling, temperature, top-p, min/max new tokens, and a repetition
        penalty for speech.  No stop or pad token, exactly like those files."""
        s = self.settings
        config: dict[str, Any] = {
            "temperature": s["temperature"],
            "top_p": s["top_p"],
            "do_sample": s["do_sample"],
            "max_new_tokens": s[f"{modality}_max_new_tokens"],
            "min_new_tokens": s["min_new_tokens"],
        }
        if modality == "speech":
            config["repetition_penalty"] = s["speech_repetition_penalty"]
        return config

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Import AnyGPT's code from the checkout, then load the SEED tokenizer with its unCLIP
        decoder, SpeechTokenizer, SoundStorm and the chat model, as the upstream chat CLI does."""
        s = self.settings
        self.warn_if_unpinned()
        upstream = self.import_checkout(import_upstream)
        import torch
        from transformers import LlamaForCausalLM, LlamaTokenizer

        try:
            device = resolve_device(s["device"])
        except SettingsError as exc:
            raise ComponentError(f"backbone=anygpt: {exc}") from None
        dtype = getattr(torch, s["dtype"])
        try:
            seed_file = local_file(s["image_tokenizer"], s["image_tokenizer_file"])
            st_config = local_file(s["speech_modules"], s["speech_tokenizer_config"])
            st_checkpoint = local_file(s["speech_modules"], s["speech_tokenizer_checkpoint"])
            soundstorm_file = local_file(s["speech_modules"], s["soundstorm_checkpoint"])
            # ImageTokenizer draws the unCLIP decoder's starting latents once, at construction:
            # seeded here, they are the same for every example (upstream draws them unseeded)
            torch.manual_seed(s["seed"])
            image_tokenizer = upstream.ImageTokenizer(
                model_path=seed_file,
                diffusion_model_path=s["image_decoder"],
                load_diffusion=True,
                image_size=s["image_size"],
                device=device,
                fp16=s["dtype"] == "float16",
            )
            speech_tokenizer = upstream.SpeechTokenizer.load_from_checkpoint(
                st_config, st_checkpoint
            )
            speech_tokenizer.eval()
            speech_tokenizer.to(device=device)
            soundstorm = upstream.load_soundstorm(soundstorm_file)
            soundstorm.eval()
            soundstorm.to(device=device)
            model = LlamaForCausalLM.from_pretrained(s["model"], torch_dtype=dtype)
            model = model.to(device)
            model.eval()
            tokenizer = LlamaTokenizer.from_pretrained(s["model"])
            tokenizer.pad_token_id = 0
            tokenizer.padding_side = "left"
        except Exception as exc:
            raise ComponentError(
                f"backbone=anygpt: cannot load AnyGPT's checkpoints: {type(exc).__name__}: {exc}"
            ) from exc
        self.upstream, self.device = upstream, device
        self.image_tokenizer, self.speech_tokenizer, self.soundstorm = (
            image_tokenizer,
            speech_tokenizer,
            soundstorm,
        )
        self.model, self.tokenizer = model, tokenizer
        self.tags = media_tags(upstream.modal_special_str)

    def unload(self) -> None:
        self.model = self.tokenizer = self.image_tokenizer = None
        self.speech_tokenizer = self.soundstorm = self.upstream = None
        release_cuda_memory()

    # -- one example -----------------------------------------------------------------------
    def example_seed(self, item: Mapping[str, Any]) -> int:
        """The random state of one example: a function of ``seed`` and the example's inputs only
        (the benchmark's runner sets no seed and runs all examples on one random stream)."""
        media = item.get("current_image")
        return item_seed(
            self.settings["seed"],
            getattr(media, "sha256", "") or "",
            item.get("current_text") or "",
            json.dumps(item.get("metadata") or {}, sort_keys=True, default=str),
            json.dumps(item.get("conditions") or {}, sort_keys=True, default=str),
        )

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        if self.model is None:
            self.load()
        import torch

        s = self.settings
        fields = P.story_fields(
            item.get("current_text"), item.get("metadata"), item.get("conditions")
        )
        seed = self.example_seed(item)
        torch.manual_seed(seed)
        usage: dict[str, Any] = {"passes": 3, "seed": seed}
        self.record_revision(usage)
        out = BackboneOutput(usage=usage)
        step = "encode"
        try:
            image_tokens = self.encode_image(item["current_image"].open_image())

            step = "text"
            answer = self.ask(
                P.with_image(image_tokens, P.text_instruction(fields)),
                "text",
                usage,
                response_prefix=P.NARRATION_PREFIX,
            )
            narration, speech_line = parse_text_answer(answer, self.tags, s["parsing"])
            usage["text_answer"], usage["speech_line"] = answer, speech_line
            if narration.strip():
                out.text = narration
            else:
                out.failures["text"] = Failure("empty_output", "the text pass gave no narration")

            step = "image"
            answer = self.ask(
                P.with_image(image_tokens, P.image_instruction(fields, narration, speech_line)),
                "image",
                usage,
                force="image",
            )
            segments = media_segments(answer, "image", self.tags)
            usage["image_segments"] = len(segments)
            if not segments:
                out.failures["image"] = self.no_run("image", answer)
            # every run is decoded in order and the first one is the page (as in the runner,
            # where the first is written before the next one is decoded)
            for index, segment in enumerate(segments):
                image = self.decode_image(segment)
                if index == 0:
                    out.image = image

            step = "speech"
            answer = self.ask(
                P.speech_instruction(fields, narration, speech_line),
                "speech",
                usage,
                force="speech",
            )
            segments = media_segments(answer, "speech", self.tags)
            usage["speech_segments"] = len(segments)
            if not segments:
                out.failures["speech"] = self.no_run("speech", answer)
            for index, segment in enumerate(segments):
                wave = self.decode_speech(segment)
                if index == 0:
                    if isinstance(wave, Failure):
                        out.failures["speech"] = wave
                    else:
                        out.speech = wave
        except Exception as exc:  # noqa: BLE001 - the earlier passes' outputs survive
            release_cuda_memory()
            mark_lost(out, step, exc)
        return out

    def no_run(self, modality: str, answer: str) -> Failure:
        start, end = self.tags[modality]
        return Failure(
            f"backbone_no_{modality}",
            f"no {start}...{end} run in the {modality} pass's answer ({len(answer)} characters)",
        )

    # -- the upstream calls ----------------------------------------------------------------
    def encode_image(self, image: Any) -> str:
        """The current page as SEED codes, written as AnyGPT's image-token string."""
        pixels = self.image_tokenizer.processor(image).to(self.device)
        codes = self.image_tokenizer.encode(pixels)[0]  # encode() runs under no_grad itself
        return self.upstream.modality_tokens_to_string(tokens=codes, modality="image")

    def prompt(
        self, message: str, *, force: str | None = None, response_prefix: str | None = None
    ) -> str:
        """One user turn in AnyGPT-chat's template (``MMGPT``), with the answer started by a
        forced media tag or a prefix."""
        conversation = self.upstream.get_conv_template("MMGPT")
        conversation.append_message(conversation.roles[0], message.strip())
        if force == "image":
            return conversation.get_prompt(force_image_generation=True)
        if force == "speech":
            return conversation.get_prompt(force_speech_generation=True)
        return conversation.get_prompt(force_res_prefix=response_prefix)

    def ask(
        self,
        message: str,
        modality: str,
        usage: dict[str, Any],
        *,
        force: str | None = None,
        response_prefix: str | None = None,
    ) -> str:
        """One generate call; returns the answer part of the decoded sequence and counts its
        tokens into ``usage``."""
        import torch
        from transformers import GenerationConfig

        text = self.prompt(message, force=force, response_prefix=response_prefix)
        input_ids = self.tokenizer(text, return_tensors="pt", padding=True).input_ids
        input_ids = input_ids.to(self.device)
        config = GenerationConfig(**self.generation_settings(modality))
        with torch.no_grad():
            sequences = self.model.generate(input_ids=input_ids, generation_config=config)
        decoded = self.tokenizer.batch_decode(sequences.cpu(), skip_special_tokens=True)[0]
        usage[f"{modality}_prompt_tokens"] = int(input_ids.shape[1])
        usage[f"{modality}_new_tokens"] = int(sequences.shape[1] - input_ids.shape[1])
        return assistant_payload(decoded, ASSISTANT_TAG)

    def decode_image(self, segment: str) -> Any:
        """One ``<soim>...<eoim>`` run -> the unCLIP decoder's image (PIL)."""
        import torch

        indices = torch.tensor([segment_codes(segment)], dtype=torch.int32, device=self.device)
        with torch.no_grad():
            image = self.image_tokenizer.decode(
                indices,
                negative_indices=None,
                guidance_scale=self.settings["image_guidance_scale"],
                num_inference_steps=self.settings["image_decode_steps"],
            )[0]
        if not hasattr(image, "convert"):
            raise TypeError(f"the image decoder returned {type(image).__name__}, not an image")
        return image.convert("RGB")

    def decode_speech(self, segment: str) -> Audio | Failure:
        """One ``<sosp>...<eosp>`` run -> SoundStorm + SpeechTokenizer waveform, no voice prompt,
        at the SpeechTokenizer's sample rate."""
        import numpy as np
        import torch

        codes = torch.tensor([segment_codes(segment)], dtype=torch.int32, device=self.device)
        with torch.no_grad():
            wav = self.upstream.semantic2acoustic(
                codes,
                None,
                self.soundstorm,
                self.speech_tokenizer,
                steps=self.settings["soundstorm_steps"],
            )
        wav = wav.squeeze(0).detach().float().cpu()  # (channels, samples)
        samples = (wav[0] if wav.dim() > 1 else wav).numpy().astype(np.float32)
        if samples.size == 0:
            return Failure("empty_output", "SoundStorm/SpeechTokenizer returned no samples")
        if not np.isfinite(samples).all():
            return Failure("empty_output", "non-finite samples in the decoded speech")
        return Audio(samples=samples, sample_rate=int(self.speech_tokenizer.sample_rate))


def mark_lost(out: BackboneOutput, step: str, exc: BaseException) -> None:
    """An exception in ``step``: that pass's modality fails with it unless the pass had already
    made it (a later media run failed to decode), the later passes were never made
    (``upstream_failed``); what the earlier passes made stays in ``out``."""
    failure = exception_failure(exc)
    label = "encoding the current page" if step == "encode" else f"the {step} pass"
    failure = Failure(failure.category, f"{label}: {failure.message}")
    first = next(index for index, (name, _) in enumerate(PASSES) if name == step)
    own = PASSES[first][1]
    for modality in dict.fromkeys(m for _, m in PASSES[first:]):
        if getattr(out, modality) is not None or modality in out.failures:
            continue
        if modality == own:
            out.failures[modality] = failure
        else:
            out.failures[modality] = Failure(
                "upstream_failed", f"not made: {label} raised before it ({failure.message})"
            )
    out.usage["error"] = failure.message


def local_file(reference: str, filename: str) -> str:
    """A checkpoint file: ``filename`` itself when absolute, else ``reference`` when it is a file,
    ``reference/filename`` when it is a directory, or ``filename`` downloaded from the hub
    repository ``reference``."""
    name = Path(filename).expanduser()
    if name.is_absolute():
        if not name.is_file():
            raise FileNotFoundError(f"{filename} does not exist")
        return str(name)
    path = Path(reference).expanduser()
    if path.is_file():
        return str(path)
    if path.is_dir():
        target = path / name
        if not target.is_file():
            raise FileNotFoundError(f"{target} does not exist")
        return str(target)
    if reference.startswith((".", "/", "~")):
        raise FileNotFoundError(f"{reference} does not exist")
    from huggingface_hub import hf_hub_download

    return hf_hub_download(repo_id=reference, filename=name.as_posix())


__all__ = ["ANYGPT_REQUIREMENTS", "AnyGPT", "local_file", "mark_lost"]
