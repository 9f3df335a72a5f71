"""A tiny checkpoint laid out like amd/Nitro-T-1.2B, built offline for the tests.

Nitro-T's own code cannot be downloaded here, so the checkpoint carries a *stand-in* remote
pipeline written below (``pipeline.py``) and a stand-in custom transformer
(``transformer/transformer.py``), declared in ``model_index.json`` the way diffusers declares
remote code.  What the tests exercise is therefore the expert's side of the contract:
diffusers' remote-code loading with ``trust_remote_code``, the separately loaded causal-LM text
encoder handed to the pipeline, and the model card's call signature.  Nitro-T's real pipeline is
not exercised.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

PIPELINE_SOURCE = '''\
"""Test stand-in for Nitro-T's remote pipeline: a text-to-image flow-matching pipeline with
classifier-free guidance, conditioned on the causal LM's last hidden states."""

import torch
from diffusers import DiffusionPipeline
from diffusers.image_processor import VaeImageProcessor
from diffusers.pipelines.pipeline_utils import ImagePipelineOutput
from diffusers.utils.torch_utils import randn_tensor


class TinyNitroPipeline(DiffusionPipeline):
    model_cpu_offload_seq = "text_encoder->transformer->vae"

    def __init__(self, transformer, vae, scheduler, tokenizer, text_encoder):
        super().__init__()
        self.register_modules(transformer=transformer, vae=vae, scheduler=scheduler,
                              tokenizer=tokenizer, text_encoder=text_encoder)
        self.image_processor = VaeImageProcessor(vae_scale_factor=vae.spatial_compression_ratio)

    def encode(self, prompts, device):
        tokens = self.tokenizer(prompts, padding="max_length", max_length=16, truncation=True,
                                return_tensors="pt")
        out = self.text_encoder(input_ids=tokens.input_ids.to(device),
                                attention_mask=tokens.attention_mask.to(device),
                                output_hidden_states=True)
        return out.hidden_states[-1]

    @torch.no_grad()
    def __call__(self, prompt, height=1024, width=1024, num_inference_steps=20,
                 guidance_scale=4.0, generator=None, output_type="pil"):
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        device, dtype = self._execution_device, self.transformer.dtype
        cond = self.encode(prompts, device).to(dtype)
        uncond = self.encode([""] * len(prompts), device).to(dtype)
        factor = self.vae.spatial_compression_ratio
        shape = (len(prompts), self.transformer.config.in_channels, height // factor,
                 width // factor)
        latents = randn_tensor(shape, generator=generator, device=device, dtype=dtype)
        self.scheduler.set_timesteps(num_inference_steps, device=device)
        for t in self.scheduler.timesteps:
            both = self.transformer(torch.cat([latents, latents]), torch.cat([cond, uncond]),
                                    t.expand(2 * len(prompts)))
            c, u = both.chunk(2)
            latents = self.scheduler.step(u + guidance_scale * (c - u), t, latents).prev_sample
        image = self.vae.decode(latents / self.vae.config.scaling_factor).sample
        return ImagePipelineOutput(images=self.image_processor.postprocess(image, output_type))
'''

TRANSFORMER_SOURCE = '''\
"""Test stand-in for Nitro-T's custom transformer class."""

import torch
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.modeling_utils import ModelMixin
from torch import nn


class TinyNitroMMDiT(ModelMixin, ConfigMixin):
    @register_to_config
    def __init__(self, in_channels=4, text_dim=32, hidden=32):
        super().__init__()
        self.proj_in = nn.Conv2d(in_channels, hidden, 1)
        self.text = nn.Linear(text_dim, hidden)
        self.time = nn.Linear(1, hidden)
        self.proj_out = nn.Conv2d(hidden, in_channels, 1)

    def forward(self, latents, text_states, timestep):
        hidden = self.proj_in(latents)
        context = self.text(text_states.mean(dim=1))
        context = context + self.time(timestep.to(hidden.dtype)[:, None] / 1000)
        return self.proj_out(torch.tanh(hidden + context[:, :, None, None]))
'''


def byte_tokenizer():
    """A byte-level BPE tokenizer (no merges) with Llama-style special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab.setdefault(char, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=64,
    )


def build_tiny_llama(path: Path, seed: int = 0) -> Path:
    """A 2-layer random LlamaForCausalLM with its tokenizer (stands in for Llama-3.2-1B)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    tokenizer = byte_tokenizer()
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        )
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _load_source(path: Path, class_name: str):
    spec = importlib.util.spec_from_file_location(f"_tiny_nitro_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, class_name)


def build_tiny_nitro(path: Path, seed: int = 0) -> Path:
    """Write the stand-in remote code, random weights and ``model_index.json`` into ``path``.

    The text encoder is not part of the directory: like Nitro-T, the pipeline receives it from
    the caller (``model_index.json`` still names its class)."""
    import diffusers
    import torch
    from diffusers import AutoencoderDC, FlowMatchEulerDiscreteScheduler

    torch.manual_seed(seed)
    path.mkdir(parents=True, exist_ok=True)
    (path / "pipeline.py").write_text(PIPELINE_SOURCE)
    (path / "transformer").mkdir(exist_ok=True)
    source = path / "transformer" / "transformer.py"
    source.write_text(TRANSFORMER_SOURCE)
    transformer = _load_source(source, "TinyNitroMMDiT")(in_channels=4, text_dim=32, hidden=32)
    transformer.save_pretrained(path / "transformer")
    blocks = 6  # 2**(6-1) = 32x spatial compression, like Nitro-T's DC-AE
    AutoencoderDC(
        in_channels=3,
        latent_channels=4,
        attention_head_dim=8,
        encoder_block_types=("ResBlock",) * blocks,
        decoder_block_types=("ResBlock",) * blocks,
        encoder_block_out_channels=(8,) * blocks,
        decoder_block_out_channels=(8,) * blocks,
        encoder_layers_per_block=(1,) * blocks,
        decoder_layers_per_block=(1,) * blocks,
        encoder_qkv_multiscales=((),) * blocks,
        decoder_qkv_multiscales=((),) * blocks,
        upsample_block_type="interpolate",
        downsample_block_type="Conv",
        scaling_factor=0.5,
    ).save_pretrained(path / "vae")
    FlowMatchEulerDiscreteScheduler().save_pretrained(path / "scheduler")
    byte_tokenizer().save_pretrained(path / "tokenizer")
    index = {
        "_class_name": ["pipeline", "TinyNitroPipeline"],
        "_diffusers_version": diffusers.__version__,
        "transformer": ["transformer", "TinyNitroMMDiT"],
        "vae": ["diffusers", "AutoencoderDC"],
        "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
        "tokenizer": ["transformers", "PreTrainedTokenizerFast"],
        "text_encoder": ["transformers", "LlamaForCausalLM"],
    }
    (path / "model_index.json").write_text(json.dumps(index, indent=2))
    return path
