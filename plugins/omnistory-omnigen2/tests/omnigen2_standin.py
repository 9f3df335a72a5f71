"""A stand-in for a VectorSpaceLab/OmniGen2 checkout and a tiny checkpoint for it.

Neither the repository nor the weights can be fetched here.  :func:`build_source_tree` writes a
directory with the two modules the plugin imports, at their upstream paths:
``omnigen2/pipelines/omnigen2/pipeline_omnigen2.py`` (``OmniGen2Pipeline``, a diffusers
``DiffusionPipeline`` with OmniGen2's call signature) and
``omnigen2/models/transformers/transformer_omnigen2.py`` (``OmniGen2Transformer2DModel``).  The
stand-in pipeline runs a real (tiny) flow-matching loop conditioned on the prompt and on the input
images, and records every call's keywords in ``pipe.calls``.  :func:`build_checkpoint` saves
random weights for it in the hub layout (``model_index.json`` naming the pipeline, ``vae/``,
``scheduler/``, ``mllm/`` + ``processor/`` (a tiny CLIP text model and tokenizer standing in for
Qwen2.5-VL), ``transformer/``).  OmniGen2's real network is not exercised.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PIPELINE_SOURCE = '''\
"""Test stand-in for OmniGen2's pipeline (omnigen2/pipelines/omnigen2/pipeline_omnigen2.py)."""

import torch
from diffusers import DiffusionPipeline
from diffusers.image_processor import VaeImageProcessor
from diffusers.utils import BaseOutput
from diffusers.utils.torch_utils import randn_tensor


class FMPipelineOutput(BaseOutput):
    images: list


class OmniGen2Pipeline(DiffusionPipeline):
    # the caller loads the transformer itself (as the official server does)
    _optional_components = ["transformer"]

    def __init__(self, vae, scheduler, mllm, processor, transformer=None):
        super().__init__()
        self.register_modules(transformer=transformer, vae=vae, scheduler=scheduler, mllm=mllm,
                              processor=processor)
        self.image_processor = VaeImageProcessor(vae_scale_factor=8)
        self.calls = []

    def text_state(self, prompt):
        ids = self.processor(prompt, padding="max_length", max_length=32, truncation=True,
                             return_tensors="pt").input_ids.to(self.mllm.device)
        return self.mllm(input_ids=ids).last_hidden_state.mean(dim=1)

    @torch.no_grad()
    def __call__(self, prompt=None, negative_prompt=None, input_images=None, height=None,
                 width=None, num_inference_steps=28, max_sequence_length=None,
                 text_guidance_scale=4.0, image_guidance_scale=1.0, cfg_range=(0.0, 1.0),
                 num_images_per_prompt=1, generator=None, output_type="pil", align_res=True,
                 **kwargs):
        self.calls.append(dict(prompt=prompt, negative_prompt=negative_prompt,
                               input_images=input_images, height=height, width=width,
                               num_inference_steps=num_inference_steps,
                               max_sequence_length=max_sequence_length,
                               text_guidance_scale=text_guidance_scale,
                               image_guidance_scale=image_guidance_scale, cfg_range=cfg_range,
                               num_images_per_prompt=num_images_per_prompt, align_res=align_res,
                               generator_device=str(generator.device)))
        device = self.mllm.device
        cond = self.text_state(prompt)
        uncond = self.text_state(negative_prompt or "")
        image_cond = torch.zeros_like(cond)
        for image in input_images or []:
            pixels = self.image_processor.preprocess(image, 32, 32).to(device)
            latent = self.vae.encode(pixels).latent_dist.mean
            image_cond = image_cond + self.transformer.image_proj(latent.mean(dim=(2, 3)))
        latents = randn_tensor((1, 4, height // 8, width // 8), generator=generator,
                               device=device)
        self.scheduler.set_timesteps(num_inference_steps, device=device)
        for t in self.scheduler.timesteps:
            c = self.transformer(latents, t, cond + image_cond)
            u = self.transformer(latents, t, uncond)
            velocity = u + text_guidance_scale * (c - u)
            latents = self.scheduler.step(velocity, t, latents).prev_sample
        image = self.vae.decode(latents).sample
        return FMPipelineOutput(images=self.image_processor.postprocess(image, output_type))
'''

TRANSFORMER_SOURCE = '''\
"""Test stand-in for OmniGen2's transformer class."""

import torch
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.modeling_utils import ModelMixin
from torch import nn


class OmniGen2Transformer2DModel(ModelMixin, ConfigMixin):
    @register_to_config
    def __init__(self, channels=4, text_dim=32, hidden=16):
        super().__init__()
        self.proj_in = nn.Conv2d(channels, hidden, 1)
        self.text = nn.Linear(text_dim, hidden)
        self.image_proj = nn.Linear(channels, text_dim)
        self.time = nn.Linear(1, hidden)
        self.proj_out = nn.Conv2d(hidden, channels, 1)

    def forward(self, latents, timestep, text_state):
        hidden = self.proj_in(latents)
        context = self.text(text_state) + self.time(timestep.reshape(1, 1).float() / 1000)
        return self.proj_out(torch.tanh(hidden + 3 * context[:, :, None, None]))
'''


def clip_tokenizer():
    """A CLIP tokenizer over the byte-level symbols (no merges): one token per character."""
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
        "omnigen2/__init__.py": "",
        "omnigen2/pipelines/__init__.py": "",
        "omnigen2/pipelines/omnigen2/__init__.py": "",
        "omnigen2/pipelines/omnigen2/pipeline_omnigen2.py": PIPELINE_SOURCE,
        "omnigen2/models/__init__.py": "",
        "omnigen2/models/transformers/__init__.py": "",
        "omnigen2/models/transformers/transformer_omnigen2.py": TRANSFORMER_SOURCE,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def build_checkpoint(path: Path, source_tree: Path, seed: int = 0) -> Path:
    """Random weights for the stand-in classes, in the hub layout."""
    import diffusers
    import torch
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler
    from transformers import CLIPTextConfig, CLIPTextModel

    sys.path.insert(0, str(source_tree))
    try:
        from omnigen2.models.transformers.transformer_omnigen2 import (
            OmniGen2Transformer2DModel,
        )
    finally:
        sys.path.remove(str(source_tree))
        for name in [m for m in sys.modules if m.split(".")[0] == "omnigen2"]:
            del sys.modules[name]
    torch.manual_seed(seed)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = clip_tokenizer()
    CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=77,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=1,
        )
    ).save_pretrained(path / "mllm")
    tokenizer.save_pretrained(path / "processor")
    AutoencoderKL(
        block_out_channels=(8, 8, 8, 8),
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        latent_channels=4,
        layers_per_block=1,
        norm_num_groups=4,
    ).save_pretrained(path / "vae")
    FlowMatchEulerDiscreteScheduler().save_pretrained(path / "scheduler")
    OmniGen2Transformer2DModel().save_pretrained(path / "transformer")
    index = {
        "_class_name": "OmniGen2Pipeline",
        "_diffusers_version": diffusers.__version__,
        "mllm": ["transformers", "CLIPTextModel"],
        "processor": ["transformers", "CLIPTokenizer"],
        "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
        "vae": ["diffusers", "AutoencoderKL"],
    }
    (path / "model_index.json").write_text(json.dumps(index, indent=2))
    return path
