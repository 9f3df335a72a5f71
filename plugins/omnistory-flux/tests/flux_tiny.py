"""Tiny random FLUX.1 checkpoints, built offline for the tests.

Every part of a real FLUX.1 pipeline is here at toy size: a FluxTransformer2DModel with guidance
embedding, an AutoencoderKL with four blocks (so the usual 8x VAE factor and 16-pixel grid), a CLIP
text encoder and a T5 encoder, and their tokenizers, made locally from a byte-level vocabulary (no
hub).  ``save_pretrained`` writes the same directory layout as the hub checkpoints.
"""

from __future__ import annotations

import string
from pathlib import Path

#: small generation settings the tests share (64x64 pixels = 4x4 latent tokens, 2 steps)
TINY = {"height": 64, "width": 64, "steps": 2, "max_sequence_length": 32}


def clip_tokenizer():
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import CLIPTokenizer

    chars = sorted(ByteLevel.alphabet())
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for suffix in ("", "</w>"):
        for char in chars:
            vocab.setdefault(char + suffix, len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def t5_tokenizer():
    from transformers import T5TokenizerFast

    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    for char in string.printable.strip():
        pieces += [(char, -3.0), ("\u2581" + char, -3.5)]
    return T5TokenizerFast(vocab=pieces, extra_ids=0, model_max_length=512)


def _sharpen(transformer, qk_gain: float = 8.0, out_gain: float = 3.0) -> None:
    """Random init gives near-uniform attention (FLUX normalises q and k), which averages the page
    tokens away; larger q/k norm gains make attention content-dependent, and a larger output
    projection makes the velocity, not the initial noise, shape the image.  This keeps Kontext's
    dependence on the page measurable in a 64x64, 2-step test."""
    import torch

    with torch.no_grad():
        for name, param in transformer.named_parameters():
            if name.endswith(("norm_q.weight", "norm_k.weight",
                              "norm_added_q.weight", "norm_added_k.weight")):
                param.mul_(qk_gain)
            elif name.startswith("proj_out."):
                param.mul_(out_gain)


def build_tiny_flux(path: Path, kind: str = "dev", seed: int = 0) -> Path:
    """Save a random FLUX.1 pipeline (``kind`` dev or kontext) into ``path``."""
    import torch
    from diffusers import (
        AutoencoderKL,
        FlowMatchEulerDiscreteScheduler,
        FluxKontextPipeline,
        FluxPipeline,
        FluxTransformer2DModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    torch.manual_seed(seed)
    tokenizer, tokenizer_2 = clip_tokenizer(), t5_tokenizer()
    text_encoder = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=77, projection_dim=32,
        bos_token_id=0, eos_token_id=1, pad_token_id=1,
    ))
    text_encoder_2 = T5EncoderModel(T5Config(
        vocab_size=len(tokenizer_2), d_model=32, d_ff=37, d_kv=8, num_layers=2, num_heads=4,
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
    ))
    transformer = FluxTransformer2DModel(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32,
        guidance_embeds=True, axes_dims_rope=(4, 4, 8),
    )
    _sharpen(transformer)
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 8, 8, 8),
        down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
        layers_per_block=1, norm_num_groups=4, sample_size=64,
        use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.1, scaling_factor=1.2,
    )
    scheduler = FlowMatchEulerDiscreteScheduler(
        use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
        base_image_seq_len=256, max_image_seq_len=4096,
    )
    pipeline_class = {"dev": FluxPipeline, "kontext": FluxKontextPipeline}[kind]
    pipeline = pipeline_class(
        scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer,
        text_encoder_2=text_encoder_2, tokenizer_2=tokenizer_2, transformer=transformer,
    )
    pipeline.save_pretrained(path)
    return path
