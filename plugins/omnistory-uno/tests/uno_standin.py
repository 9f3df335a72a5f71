"""A stand-in for a bytedance/UNO checkout and tiny weight files for it.

:func:`build_source_tree` writes the modules the plugin imports, at their upstream paths:
``uno/flux/util.py`` (reads ``FLUX_DEV`` and ``AE`` when imported, ``LORA``, ``T5`` and ``CLIP``
when loading, as UNO does) and ``uno/flux/pipeline.py`` (``preprocess_ref`` and
``UNOPipeline(model_type, device, offload, only_lora, lora_rank)`` called with UNO's keywords).
The stand-in pipeline loads the files the variables name (safetensors and tokenizer
directories), draws a small image from noise seeded with ``seed``, conditioned on the prompt's
tokens and the references, and records every call in ``pipe.calls``.  UNO's FLUX network is not
exercised.
"""

from __future__ import annotations

from pathlib import Path

UTIL_SOURCE = '''\
"""Test stand-in for uno/flux/util.py: weight locations from the environment."""

import os

from safetensors.torch import load_file
from transformers import CLIPTokenizer

configs = {"flux-dev": {"ckpt_path": os.getenv("FLUX_DEV"), "ae_path": os.getenv("AE")}}


def load_flow_model_only_lora(name, device="cpu", lora_rank=16):
    weights = load_file(configs[name]["ckpt_path"])
    lora = load_file(os.environ["LORA"])
    return {"token": weights["token"] + lora["delta"][: weights["token"].shape[0]],
            "rank": lora_rank}


def load_ae(name, device="cpu"):
    return load_file(configs[name]["ae_path"])


def load_t5(device="cpu", max_length=512):
    return CLIPTokenizer.from_pretrained(os.environ.get("T5", "xlabs-ai/xflux_text_encoders"))


def load_clip(device="cpu"):
    return CLIPTokenizer.from_pretrained(os.environ.get("CLIP", "openai/clip-vit-large-patch14"))
'''

PIPELINE_SOURCE = '''\
"""Test stand-in for uno/flux/pipeline.py."""

import numpy as np
import torch
from PIL import Image

from uno.flux.util import load_ae, load_clip, load_flow_model_only_lora, load_t5


def preprocess_ref(raw_image, long_size=512):
    width, height = raw_image.size
    if width >= height:
        new_w, new_h = long_size, int(long_size / width * height)
    else:
        new_h, new_w = long_size, int(long_size / height * width)
    image = raw_image.resize((new_w, new_h), resample=Image.LANCZOS)
    target_w, target_h = new_w // 16 * 16, new_h // 16 * 16
    left, top = (new_w - target_w) // 2, (new_h - target_h) // 2
    return image.crop((left, top, left + target_w, top + target_h)).convert("RGB")


class UNOPipeline:
    def __init__(self, model_type, device, offload=False, only_lora=False, lora_rank=16):
        self.device, self.offload, self.model_type = device, offload, model_type
        self.clip = load_clip(device)
        self.t5 = load_t5(device, max_length=512)
        self.ae = load_ae(model_type, device="cpu" if offload else device)
        self.model = load_flow_model_only_lora(model_type, device=device, lora_rank=lora_rank)
        self.only_lora = only_lora
        self.calls = []

    def __call__(self, prompt, width=512, height=512, guidance=4, num_steps=50, seed=123456789,
                 **kwargs):
        width, height = 16 * (width // 16), 16 * (height // 16)
        self.calls.append(dict(prompt=prompt, width=width, height=height, guidance=guidance,
                               num_steps=num_steps, seed=seed,
                               ref_sizes=[im.size for im in kwargs.get("ref_imgs") or []],
                               pe=kwargs.get("pe")))
        generator = torch.Generator("cpu").manual_seed(seed)
        x = torch.randn(3, height // 16, width // 16, generator=generator)
        ids = self.t5(prompt, truncation=True, max_length=64).input_ids
        table = self.model["token"]
        x = x + table[torch.tensor(ids) % table.shape[0]].mean() * guidance
        for ref in kwargs.get("ref_imgs") or []:
            x = x + torch.from_numpy(np.asarray(ref, dtype=np.float32) / 255.0).mean()
        for _ in range(num_steps):
            x = torch.tanh(x * self.ae["gain"])
        pixels = ((x.clamp(-1, 1) + 1) * 127.5).byte().permute(1, 2, 0).numpy()
        return Image.fromarray(pixels).resize((width, height), Image.NEAREST)
'''


def clip_tokenizer():
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for suffix in ("", "</w>"):
        for char in sorted(ByteLevel.alphabet()):
            vocab.setdefault(char + suffix, len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def build_source_tree(root: Path) -> Path:
    """The stand-in checkout (no torch needed)."""
    files = {
        "uno/__init__.py": "",
        "uno/flux/__init__.py": "",
        "uno/flux/util.py": UTIL_SOURCE,
        "uno/flux/pipeline.py": PIPELINE_SOURCE,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def build_weights(root: Path, seed: int = 0) -> dict[str, Path]:
    """Tiny files for each of UNO's variables, by the expert's parameter names."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(seed)
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "flux_dev": root / "flux1-dev.safetensors",
        "ae": root / "ae.safetensors",
        "lora": root / "dit_lora.safetensors",
        "t5": root / "t5",
        "clip": root / "clip",
    }
    save_file({"token": torch.randn(64)}, str(files["flux_dev"]))
    save_file({"gain": torch.tensor(1.5)}, str(files["ae"]))
    save_file({"delta": torch.randn(64) * 0.1}, str(files["lora"]))
    clip_tokenizer().save_pretrained(files["t5"])
    clip_tokenizer().save_pretrained(files["clip"])
    return files
