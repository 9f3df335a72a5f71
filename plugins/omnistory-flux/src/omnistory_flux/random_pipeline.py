"""Random-weight FLUX.1 pipelines, built offline: tiny ones for tests, full-size ones for timing.

``full`` has the architecture of FLUX.1-dev (12B transformer, T5-XXL encoder, CLIP-L, 16-channel
VAE) with random weights, so its cost per image equals the real model's; ``tiny`` keeps every
component at toy size.  The tokenizers are made locally from a byte-level vocabulary (no hub); they
pad to the same lengths as the real ones (77 CLIP tokens, ``max_sequence_length`` T5 tokens).
"""

from __future__ import annotations

import string
from typing import Any

#: component configurations by size
CONFIGS: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "transformer": dict(
            patch_size=1,
            in_channels=16,
            num_layers=1,
            num_single_layers=1,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=32,
            pooled_projection_dim=32,
            guidance_embeds=True,
            axes_dims_rope=(4, 4, 8),
        ),
        "vae": dict(
            in_channels=3,
            out_channels=3,
            latent_channels=4,
            block_out_channels=(8, 8, 8, 8),
            down_block_types=("DownEncoderBlock2D",) * 4,
            up_block_types=("UpDecoderBlock2D",) * 4,
            layers_per_block=1,
            norm_num_groups=4,
            sample_size=64,
            use_quant_conv=False,
            use_post_quant_conv=False,
            shift_factor=0.1,
            scaling_factor=1.2,
        ),
        "clip": dict(
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=2,
            num_attention_heads=4,
            projection_dim=32,
        ),
        "t5": dict(d_model=32, d_ff=37, d_kv=8, num_layers=2, num_heads=4),
    },
    "full": {  # FLUX.1-dev's published component configurations
        "transformer": dict(
            patch_size=1,
            in_channels=64,
            num_layers=19,
            num_single_layers=38,
            attention_head_dim=128,
            num_attention_heads=24,
            joint_attention_dim=4096,
            pooled_projection_dim=768,
            guidance_embeds=True,
            axes_dims_rope=(16, 56, 56),
        ),
        "vae": dict(
            in_channels=3,
            out_channels=3,
            latent_channels=16,
            block_out_channels=(128, 256, 512, 512),
            down_block_types=("DownEncoderBlock2D",) * 4,
            up_block_types=("UpDecoderBlock2D",) * 4,
            layers_per_block=2,
            norm_num_groups=32,
            sample_size=1024,
            use_quant_conv=False,
            use_post_quant_conv=False,
            shift_factor=0.1159,
            scaling_factor=0.3611,
        ),
        "clip": dict(
            hidden_size=768,
            intermediate_size=3072,
            num_hidden_layers=12,
            num_attention_heads=12,
            projection_dim=768,
            hidden_act="quick_gelu",
        ),
        "t5": dict(
            vocab_size=32128,
            d_model=4096,
            d_ff=10240,
            d_kv=64,
            num_layers=24,
            num_heads=64,
            feed_forward_proj="gated-gelu",
        ),
    },
}


def clip_tokenizer():
    """A CLIP tokenizer over the 256 byte-level symbols (no merges): one token per character."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import CLIPTokenizer

    chars = sorted(ByteLevel.alphabet())
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for suffix in ("", "</w>"):
        for char in chars:
            vocab.setdefault(char + suffix, len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def t5_tokenizer():
    """A unigram T5 tokenizer over printable ASCII characters (others map to ``<unk>``)."""
    from transformers import T5TokenizerFast

    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    for char in string.printable.strip():
        pieces += [(char, -3.0), ("\u2581" + char, -3.5)]
    return T5TokenizerFast(vocab=pieces, extra_ids=0, model_max_length=512)


def sharpen_attention(transformer, qk_gain: float = 8.0, out_gain: float = 3.0) -> None:
    """Make a tiny random transformer's output depend measurably on its context.

    Random init gives near-uniform attention (FLUX normalises q and k), which averages the page
    tokens away; larger q/k norm gains make attention content-dependent, and a larger output
    projection lets the velocity, not the initial noise, shape the image.
    """
    import torch

    with torch.no_grad():
        for name, param in transformer.named_parameters():
            if name.endswith(
                ("norm_q.weight", "norm_k.weight", "norm_added_q.weight", "norm_added_k.weight")
            ):
                param.mul_(qk_gain)
            elif name.startswith("proj_out."):
                param.mul_(out_gain)


def random_flux_pipeline(
    kind: str = "dev",
    size: str = "tiny",
    *,
    seed: int = 0,
    device: str = "cpu",
    dtype: Any = None,
    sharpen: bool = False,
):
    """A FluxPipeline (``kind="dev"``) or FluxKontextPipeline (``"kontext"``) with random weights,
    built directly on ``device`` in ``dtype`` (default float32)."""
    import torch
    from diffusers import (
        AutoencoderKL,
        FlowMatchEulerDiscreteScheduler,
        FluxKontextPipeline,
        FluxPipeline,
        FluxTransformer2DModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    config = CONFIGS[size]
    pipeline_class = {"dev": FluxPipeline, "kontext": FluxKontextPipeline}[kind]
    dtype = dtype or torch.float32
    torch.manual_seed(seed)
    tokenizer, tokenizer_2 = clip_tokenizer(), t5_tokenizer()
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # initialise in the target dtype: no fp32 copy of 12B weights
    try:
        with torch.device(device):
            text_encoder = CLIPTextModel(
                CLIPTextConfig(
                    vocab_size=max(len(tokenizer), 49408 if size == "full" else 0),
                    max_position_embeddings=77,
                    bos_token_id=0,
                    eos_token_id=1,
                    pad_token_id=1,
                    **config["clip"],
                )
            )
            t5 = dict(config["t5"])
            t5.setdefault("vocab_size", len(tokenizer_2))
            text_encoder_2 = T5EncoderModel(
                T5Config(
                    pad_token_id=0,
                    eos_token_id=1,
                    decoder_start_token_id=0,
                    **t5,
                )
            )
            transformer = FluxTransformer2DModel(**config["transformer"])
            vae = AutoencoderKL(**config["vae"])
    finally:
        torch.set_default_dtype(previous)
    if sharpen:
        sharpen_attention(transformer)
    scheduler = FlowMatchEulerDiscreteScheduler(
        shift=3.0,
        use_dynamic_shifting=True,
        base_shift=0.5,
        max_shift=1.15,
        base_image_seq_len=256,
        max_image_seq_len=4096,
    )
    pipeline = pipeline_class(
        scheduler=scheduler,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        text_encoder_2=text_encoder_2,
        tokenizer_2=tokenizer_2,
        transformer=transformer,
    )
    return pipeline.to(device)  # the weights were created in dtype already
