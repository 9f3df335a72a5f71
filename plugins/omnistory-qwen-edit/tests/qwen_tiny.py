"""A tiny random Qwen-Image-Edit-2509 checkpoint, built offline for the tests.

Every component of the real checkpoint at toy size, saved in its layout (``model_index.json``,
``transformer/``, ``vae/``, ``text_encoder/``, ``tokenizer/``, ``processor/``, ``scheduler/``):
a ``QwenImageTransformer2DModel``, an ``AutoencoderKLQwenImage`` with five downsamplings (32x,
so a reference resized to ~1024^2 by the pipeline is 16x16 latent patches, not 64x64), a
``Qwen2_5_VLForConditionalGeneration`` with a vision tower, a byte-level tokenizer carrying
Qwen's chat and vision tokens, and a ``Qwen2VLImageProcessor``.  The expert loads it through its
own ``load()``; the output size must be a multiple of 64 (the VAE's 32 x the 2x2 packing).
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
#: small call settings the tests share
TINY = {"height": 64, "width": 64, "steps": 2}


def qwen_tokenizer():
    """A byte-level BPE tokenizer (no merges) with Qwen's special tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import Qwen2TokenizerFast

    vocab: dict[str, int] = {}
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab.setdefault(char, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return Qwen2TokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )


def build_tiny_qwen_edit(path: Path, seed: int = 0) -> Path:
    """Write the random checkpoint into ``path``."""
    import diffusers
    import torch
    from diffusers import (
        AutoencoderKLQwenImage,
        FlowMatchEulerDiscreteScheduler,
        QwenImageTransformer2DModel,
    )
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2VLImageProcessor,
    )

    torch.manual_seed(seed)
    path.mkdir(parents=True, exist_ok=True)
    tok = qwen_tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = Qwen2_5_VLConfig(
        text_config={
            "hidden_size": 16,
            "intermediate_size": 16,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "vocab_size": len(tok),
            "max_position_embeddings": 4096,
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"},
            "rope_theta": 1000000.0,
        },
        vision_config={
            "depth": 2,
            "hidden_size": 16,
            "intermediate_size": 16,
            "num_heads": 2,
            "out_hidden_size": 16,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "fullatt_block_indexes": [1],
            "window_size": 112,
        },
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
    )
    Qwen2_5_VLForConditionalGeneration(config).save_pretrained(path / "text_encoder")
    Qwen2VLImageProcessor(patch_size=14, temporal_patch_size=2, merge_size=2).save_pretrained(
        path / "processor"
    )
    tok.save_pretrained(path / "processor")
    tok.save_pretrained(path / "tokenizer")
    z = 4
    AutoencoderKLQwenImage(
        base_dim=2,
        z_dim=z,
        dim_mult=[1] * 6,
        num_res_blocks=0,
        temperal_downsample=[False, True, True, True, True],
        latents_mean=[0.0] * z,
        latents_std=[1.0] * z,
    ).save_pretrained(path / "vae")
    QwenImageTransformer2DModel(
        patch_size=2,
        in_channels=4 * z,
        out_channels=z,
        num_layers=2,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=16,
        guidance_embeds=False,
        axes_dims_rope=(8, 4, 4),
    ).save_pretrained(path / "transformer")
    FlowMatchEulerDiscreteScheduler().save_pretrained(path / "scheduler")
    index = {
        "_class_name": "QwenImageEditPlusPipeline",
        "_diffusers_version": diffusers.__version__,
        "processor": ["transformers", "Qwen2VLProcessor"],
        "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
        "text_encoder": ["transformers", "Qwen2_5_VLForConditionalGeneration"],
        "tokenizer": ["transformers", "Qwen2Tokenizer"],
        "transformer": ["diffusers", "QwenImageTransformer2DModel"],
        "vae": ["diffusers", "AutoencoderKLQwenImage"],
    }
    (path / "model_index.json").write_text(json.dumps(index, indent=2))
    return path


#: the file name of the Next-Scene LoRA (v2) that the preset loads
LORA_FILE = "next-scene_lora-v2-3000.safetensors"


def build_tiny_lora(
    path: Path, checkpoint: Path, seed: int = 1, weight_name: str = LORA_FILE
) -> Path:
    """A random rank-2 LoRA (large enough to change the image) on the tiny transformer's attention
    projections, in diffusers' key layout, saved as ``path/weight_name``."""
    import torch
    from diffusers import QwenImageTransformer2DModel
    from safetensors.torch import save_file

    torch.manual_seed(seed)
    transformer = QwenImageTransformer2DModel.from_pretrained(checkpoint, subfolder="transformer")
    state: dict[str, torch.Tensor] = {}
    for name, module in transformer.named_modules():
        if name.endswith(("attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0")):
            out_f, in_f = module.weight.shape
            state[f"transformer.{name}.lora_A.weight"] = torch.randn(2, in_f)
            state[f"transformer.{name}.lora_B.weight"] = torch.randn(out_f, 2) * 4
    path.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path / weight_name))
    return path
