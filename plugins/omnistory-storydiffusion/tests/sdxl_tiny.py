"""A tiny random SDXL checkpoint, built offline for the tests (StoryDiffusion and Story-Adapter).

The components of a ``StableDiffusionXLPipeline`` at toy size, saved with ``save_pretrained`` in
the hub layout: a ``UNet2DConditionModel`` with SDXL's text-time conditioning and cross-attention
up blocks (the layers consistent self-attention replaces), an ``AutoencoderKL`` (8x), a
``CLIPTextModel`` and a ``CLIPTextModelWithProjection`` with CLIP tokenizers made locally (one
token per character), and a scheduler.  Sizes must be multiples of 16.
"""

from __future__ import annotations

from pathlib import Path

#: small call settings the tests share (64x64 pixels = 8x8 latents, 2 steps)
TINY = {"height": 64, "width": 64, "steps": 2}


def clip_tokenizer():
    """A CLIP tokenizer over the byte-level symbols (no merges): one token per character."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for suffix in ("", "</w>"):
        for char in sorted(ByteLevel.alphabet()):
            vocab.setdefault(char + suffix, len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def tiny_sdxl_pipeline(seed: int = 0):
    """The random pipeline (float32, CPU)."""
    import torch
    from diffusers import (
        AutoencoderKL,
        EulerDiscreteScheduler,
        StableDiffusionXLPipeline,
        UNet2DConditionModel,
    )
    from transformers import (
        CLIPTextConfig,
        CLIPTextModel,
        CLIPTextModelWithProjection,
    )

    torch.manual_seed(seed)
    tokenizer = clip_tokenizer()
    unet = UNet2DConditionModel(
        block_out_channels=(16, 32),
        layers_per_block=1,
        sample_size=8,
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=(2, 4),
        use_linear_projection=True,
        addition_embed_type="text_time",
        addition_time_embed_dim=8,
        transformer_layers_per_block=(1, 1),
        projection_class_embeddings_input_dim=80,  # 6 * 8 + the 32-dim pooled text embedding
        cross_attention_dim=64,
        norm_num_groups=1,
    )
    vae = AutoencoderKL(
        block_out_channels=(4, 4, 4, 4),
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        latent_channels=4,
        layers_per_block=1,
        norm_num_groups=2,
        sample_size=64,
    )
    clip = dict(
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
        hidden_size=32,
        intermediate_size=37,
        num_attention_heads=4,
        num_hidden_layers=2,
        vocab_size=len(tokenizer),
        max_position_embeddings=77,
        hidden_act="gelu",
        projection_dim=32,
    )
    return StableDiffusionXLPipeline(
        vae=vae,
        text_encoder=CLIPTextModel(CLIPTextConfig(**clip)),
        text_encoder_2=CLIPTextModelWithProjection(CLIPTextConfig(**clip)),
        tokenizer=tokenizer,
        tokenizer_2=clip_tokenizer(),
        unet=unet,
        scheduler=EulerDiscreteScheduler(
            beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", steps_offset=1
        ),
    )


def build_tiny_sdxl(path: Path, seed: int = 0) -> Path:
    """Save the random pipeline into ``path``."""
    tiny_sdxl_pipeline(seed).save_pretrained(path)
    return path
