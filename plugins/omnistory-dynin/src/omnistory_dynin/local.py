"""The ``transformers`` backend: Dynin-Omni, MAGVIT-v2 and the EMOVA speech decoder in this process.

Loading follows the benchmark's Dynin-Omni runner: the tokenizer and the model come from the
checkpoint (``trust_remote_code`` for the tokenizer, ``DyninOmniModelLM`` from the checkout for the
model), MAGVIT-v2 from ``MAGVITv2.from_pretrained``, and the speech decoder is built from its
remote-code config (``AutoConfig`` / ``AutoModel.from_config``, ``runtime_repo_id`` set) with its
``model.safetensors`` loaded strictly after renaming the old weight-norm keys (``weight_g`` /
``weight_v``) to torch's parametrization names.  A hub revision is passed only for hub ids, never
for local directories.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.api import Audio, Failure
from omnistory_dynin import layout as L
from omnistory_dynin.prompts import build_prompt, example_seed
from omnistory_dynin.sampler import sample_joint, span_vocabularies

log = logging.getLogger("omnistory")

#: MAGVIT-v2 turns 16x16 pixel patches into one code: 336 px -> 21 x 21 = 441 codes
PATCH = 16
#: the shortest waveform the runner accepts (seconds)
MIN_SPEECH_SECONDS = 0.1


class LoadError(RuntimeError):
    """A checkpoint could not be loaded or is not the expected one."""


def hub_options(source: str, revision: str | None, local_only: bool) -> dict[str, Any]:
    """``from_pretrained`` options: the revision only for hub ids (not local directories)."""
    options: dict[str, Any] = {"local_files_only": bool(local_only)}
    if revision and not Path(source).is_dir():
        options["revision"] = revision
    return options


def rename_weight_norm(state: dict[str, Any]) -> dict[str, Any]:
    """Old ``weight_norm`` keys (``.weight_g`` / ``.weight_v``) as torch's parametrizations."""
    renamed = {}
    for key, value in state.items():
        key = key.replace(".weight_g", ".parametrizations.weight.original0")
        key = key.replace(".weight_v", ".parametrizations.weight.original1")
        renamed[key] = value
    return renamed


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise LoadError(f"device={device!r} was requested but no CUDA device is visible")
    return device


def resolve_dtype(dtype: str, device: str) -> Any:
    """``auto``: bfloat16 on a GPU (the runner's choice), float32 on the CPU."""
    import torch

    if dtype == "auto":
        dtype = "float32" if device == "cpu" else "bfloat16"
    return getattr(torch, dtype)


@dataclass
class Loaded:
    tokenizer: Any
    model: Any
    image_codec: Any
    speech_codec: Any
    device: str


def load_speech_codec(p: dict[str, Any], device: str) -> Any:
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModel

    source = p["speech_codec"]
    options = hub_options(source, p["speech_codec_revision"], p["local_files_only"])
    config = AutoConfig.from_pretrained(source, trust_remote_code=True, **options)
    config.runtime_repo_id = p["speech_runtime_repo"]
    codec = AutoModel.from_config(config, trust_remote_code=True)
    if Path(source).is_dir():
        weights = Path(source) / "model.safetensors"
    else:
        from huggingface_hub import hf_hub_download

        weights = Path(hf_hub_download(repo_id=source, filename="model.safetensors", **options))
    state = rename_weight_norm(load_file(str(weights), device="cpu"))
    missing, unexpected = codec.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise LoadError(
            f"speech decoder weights do not match {source}: missing={list(missing)[:5]}, "
            f"unexpected={list(unexpected)[:5]}"
        )
    return codec.to(device).eval()


def load(p: dict[str, Any], source_dir: Path) -> Loaded:
    """Import the checkout's classes and load the four parts (tokenizer, MAGVIT-v2, speech
    decoder, model) in the runner's order; checks the tokenizer and model against the layout."""
    from transformers import AutoTokenizer

    from omnistory_dynin.source import import_models

    layout: L.TokenLayout = p["token_layout"]
    model_cls, magvit_cls = import_models(source_dir)
    device = resolve_device(p["device"])
    local = p["local_files_only"]
    options = hub_options(p["model"], p["revision"], local)
    tokenizer = AutoTokenizer.from_pretrained(p["model"], trust_remote_code=True, **options)
    if layout.tokenizer_length is not None and len(tokenizer) != layout.tokenizer_length:
        raise LoadError(
            f"{p['model']}: the tokenizer has {len(tokenizer)} entries, expected "
            f"{layout.tokenizer_length} (the Dynin-Omni_nips tokenizer with the reserved TI2TIS "
            f"id {layout.task_id}); set backbone.token_layout for another checkpoint"
        )
    image_options = hub_options(p["image_codec"], p["image_codec_revision"], local)
    image_codec = magvit_cls.from_pretrained(p["image_codec"], **image_options).to(device).eval()
    speech_codec = load_speech_codec(p, device)
    model = model_cls.from_pretrained(
        p["model"], torch_dtype=resolve_dtype(p["dtype"], device), **options
    )
    model = model.to(device).eval()
    config = model.config
    if layout.model_type is not None and getattr(config, "model_type", None) != layout.model_type:
        raise LoadError(
            f"{p['model']}: model_type is {getattr(config, 'model_type', None)!r}, expected "
            f"{layout.model_type!r} (the Dynin-Omni_nips configuration)"
        )
    vocab = getattr(config, "vocab_size", None)
    if not isinstance(vocab, int) or vocab <= layout.task_id:
        raise LoadError(f"{p['model']}: vocab_size {vocab!r} does not hold the task id")
    if getattr(config, "mask_token_id", None) is None:
        raise LoadError(f"{p['model']}: the config has no mask_token_id")
    return Loaded(tokenizer, model, image_codec, speech_codec, device)


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def resized_size(width: int, height: int, resolution: int) -> tuple[int, int]:
    """(width, height) after scaling the short side to ``resolution`` (long side truncated, as
    torchvision's ``Resize(int)`` computes it)."""
    if width <= height:
        return resolution, int(resolution * height / width)
    return int(resolution * width / height), resolution


def source_codes(parts: Loaded, image: Any, resolution: int) -> list[int]:
    """MAGVIT-v2 codes of the current page, transformed as the runner's torchvision pipeline:
    bicubic resize of the short side to ``resolution``, center crop, scale to [-1, 1]."""
    import numpy as np
    import torch
    from PIL import Image

    image = image.resize(resized_size(image.width, image.height, resolution), Image.BICUBIC)
    left = int(round((image.width - resolution) / 2.0))
    top = int(round((image.height - resolution) / 2.0))
    image = image.crop((left, top, left + resolution, top + resolution))
    pixels = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
    pixels = ((pixels - 0.5) / 0.5).unsqueeze(0).to(parts.device)
    with torch.inference_mode():
        codes = parts.image_codec.get_code(pixels)[0].long()
    return [int(c) for c in codes.flatten().tolist()]


def decode_text(parts: Loaded, ids: list[int]) -> str | Failure:
    eos = parts.tokenizer.eos_token_id
    story = parts.tokenizer.decode(L.text_until_eos(ids, eos), skip_special_tokens=True).strip()
    return story if story else Failure("empty_output", "generated text is blank")


def decode_image(parts: Loaded, ids: list[int], text_vocab: int, resolution: int) -> Any:
    import torch
    from PIL import Image

    codes = torch.tensor(L.image_codes(ids, text_vocab), device=parts.device)[None]
    with torch.inference_mode():
        pixels = parts.image_codec.decode_code(codes).clamp(-1, 1)
    array = ((pixels[0].float() + 1) * 127.5).permute(1, 2, 0).byte().cpu().numpy()
    image = Image.fromarray(array)
    if image.size != (resolution, resolution):
        return Failure(
            "model_error",
            f"the decoded image is {image.size[0]}x{image.size[1]}, "
            f"expected {resolution}x{resolution}",
        )
    return image


def decode_speech(
    parts: Loaded, codes: list[int], style: str, minimum: int
) -> tuple[Audio | Failure, float | None]:
    import numpy as np
    import soundfile as sf

    if len(codes) < minimum:
        message = f"speech ended after {len(codes)} codes (at least {minimum} are needed)"
        return Failure("empty_output", message), None
    handle, path = tempfile.mkstemp(prefix="omnistory-dynin-", suffix=".wav")
    os.close(handle)
    try:
        parts.speech_codec.decode(L.speech_units(codes), condition=style, output_wav_file=path)
        samples, rate = sf.read(path, dtype="float32", always_2d=True)
    finally:
        Path(path).unlink(missing_ok=True)
    samples = samples.mean(axis=1) if samples.shape[1] > 1 else samples[:, 0]
    seconds = len(samples) / rate if rate > 0 else 0.0
    if rate <= 0 or seconds < MIN_SPEECH_SECONDS or not np.isfinite(samples).all():
        message = f"invalid speech waveform ({seconds:.3f} s at {rate} Hz)"
        return Failure("empty_output", message), None
    return Audio(samples=samples.astype(np.float32), sample_rate=int(rate)), round(seconds, 3)


def run_example(parts: Loaded, p: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """One joint pass.  Returns ``{"text", "image", "speech"}`` (value or Failure) and ``usage``;
    raises for failures that leave nothing (the sequence does not fit, the sampler fails)."""
    import torch

    layout: L.TokenLayout = p["token_layout"]
    tokenizer, model = parts.tokenizer, parts.model
    text_vocab = len(tokenizer)
    mask_id = int(model.config.mask_token_id)
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    seed = example_seed(p["seed"], item)
    resolution = p["image_resolution"]
    codes = source_codes(parts, item["current_image"].open_image(), resolution)
    prompt = build_prompt(
        item.get("metadata"), item.get("current_text") or "", item.get("conditions")
    )
    built = L.build_sequence(
        source_codes=codes,
        prompt_ids=_encode(tokenizer, prompt),
        bos_id=tokenizer.bos_token_id,
        eos_id=eos,
        pad_id=pad,
        mask_id=mask_id,
        encode=lambda text: _encode(tokenizer, text),
        layout=layout,
        text_vocab=text_vocab,
        prompt_length=p["prompt_length"],
        text_length=p["text_length"],
        speech_length=p["speech_length"],
        expected_source_codes=(resolution // PATCH) ** 2,
    )
    device = parts.device
    sequence = torch.tensor(built.ids, dtype=torch.long, device=device)[None]
    attention = torch.tensor(built.attention(), dtype=torch.bool, device=device)[None]
    generator = torch.Generator(device=device).manual_seed(seed)
    vocabularies = span_vocabularies(
        text_vocab=text_vocab, layout=layout, eos_id=eos, device=device
    )
    sequence, forwards = sample_joint(
        model,
        sequence,
        built.spans,
        attention,
        vocabularies=vocabularies,
        steps=p["steps"],
        mask_id=mask_id,
        generator=generator,
    )
    ids = sequence[0].tolist()

    def span(name: str) -> list[int]:
        return ids[slice(*built.spans[name])]

    speech_base = text_vocab + layout.image_codebook_size
    spoken = L.speech_codes(
        span("speech"),
        base=speech_base,
        size=layout.speech_codebook_size,
        stop_ids=(layout.eoa_id, eos),
    )
    results: dict[str, Any] = {"text": decode_text(parts, span("text"))}
    try:
        results["image"] = decode_image(parts, span("image"), text_vocab, resolution)
    except Exception as exc:  # noqa: BLE001 - this modality fails, the others may survive
        results["image"] = Failure(
            "model_error", f"image decoding failed: {type(exc).__name__}: {exc}"
        )
    try:
        results["speech"], seconds = decode_speech(
            parts, spoken, p["speech_style"], p["min_speech_codes"]
        )
    except Exception as exc:  # noqa: BLE001
        results["speech"], seconds = (
            Failure("model_error", f"speech decoding failed: {type(exc).__name__}: {exc}"),
            None,
        )
    usage = {
        "backend": "transformers",
        "passes": 1,
        "forwards": forwards,
        "steps": p["steps"],
        "seed": seed,
        "sequence_length": len(ids),
        "prompt_tokens": built.prompt_tokens,
        "source_image_codes": built.source_codes,
        "speech_codes": len(spoken),
        "speech_style": p["speech_style"],
        # the model's own speech metadata tail; the decoder uses the fixed speech_style instead
        "generated_speech_metadata": L.tail_values(
            ids, built.spans, lambda t: tokenizer.decode(t, skip_special_tokens=False)
        ),
    }
    if seconds is not None:
        usage["speech_seconds"] = seconds
    return {**results, "usage": usage}
