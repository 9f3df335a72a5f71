"""Fixtures for the VoxCPM model tests: a tiny random VoxCPM2 checkpoint built locally.

Nothing here imports torch or voxcpm at module import, so the pure tests also run in an
environment without the model stack.
"""

from __future__ import annotations

import json
import os

import pytest

# The tests must never reach a hub; set before transformers/huggingface_hub are imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TOKENIZER_CORPUS = [
    "(female voice, warm and smooth timbre, happy and lively tone, fast pace, high pitch, clear"
    " recording)Look, a boat!",
    "(male voice, rich and rounded timbre, sad and downcast tone, slow pace, low pitch)Where?",
]


def tiny_config(vocab_size: int) -> dict:
    """A VoxCPM2 ``config.json`` with every width at 8-32 (real layout, toy sizes).

    The audio VAE keeps VoxCPM2's 16 kHz in / 48 kHz out: the decoder upsamples 3x more than the
    encoder downsamples.
    """
    head_dim = 16 // 2
    return {
        "architecture": "voxcpm2",
        "lm_config": {
            "bos_token_id": 1,
            "eos_token_id": 2,
            "hidden_size": 16,
            "intermediate_size": 32,
            "max_position_embeddings": 512,
            "num_attention_heads": 2,
            "num_hidden_layers": 1,
            "num_key_value_heads": 1,
            "rms_norm_eps": 1e-5,
            "vocab_size": vocab_size,
            "rope_scaling": {
                "type": "longrope",
                "long_factor": [1.0] * (head_dim // 2),
                "short_factor": [1.0] * (head_dim // 2),
                "original_max_position_embeddings": 512,
            },
            "use_mup": False,
            "scale_emb": 1.0,
            "dim_model_base": 16,
            "scale_depth": 1.0,
            "rope_theta": 10000.0,
        },
        "patch_size": 2,
        "feat_dim": 8,
        "residual_lm_num_layers": 1,
        "scalar_quantization_latent_dim": 8,
        "scalar_quantization_scale": 9,
        "encoder_config": {"hidden_dim": 16, "ffn_dim": 32, "num_heads": 2, "num_layers": 1},
        "dit_config": {
            "hidden_dim": 16,
            "ffn_dim": 32,
            "num_heads": 2,
            "num_layers": 1,
            "cfm_config": {},
        },
        "audio_vae_config": {
            "encoder_dim": 8,
            "encoder_rates": [2, 2],
            "latent_dim": 8,
            "decoder_dim": 32,
            "decoder_rates": [3, 2, 2],
            "cond_dim": 8,
            "sample_rate": 16000,
            "out_sample_rate": 48000,
        },
        "max_length": 256,
        "device": "cpu",
        "dtype": "float32",
    }


def build_tiny_voxcpm(path: str) -> None:
    """Save a random VoxCPM2 checkpoint in the layout ``VoxCPM.from_pretrained`` reads from a
    local directory: config.json, tokenizer files, model.safetensors, audiovae.safetensors."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaTokenizerFast
    from voxcpm.model.voxcpm2 import VoxCPM2Model, VoxCPMConfig
    from voxcpm.modules.audiovae import AudioVAEV2

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # VoxCPM2 uses ids 101-104 as audio/reference markers: keep them reserved.
    special = ["<unk>", "<s>", "</s>"] + [f"<reserved_{i}>" for i in range(3, 110)]
    tok.train_from_iterator(
        TOKENIZER_CORPUS,
        trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=special,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tokenizer = LlamaTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        add_bos_token=False,
        add_eos_token=False,
    )
    os.makedirs(path, exist_ok=True)
    tokenizer.save_pretrained(path)
    config = tiny_config(len(tokenizer))
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(config, fh)

    torch.manual_seed(0)
    parsed = VoxCPMConfig.model_validate(config)
    vae = AudioVAEV2(config=parsed.audio_vae_config)
    model = VoxCPM2Model(parsed, LlamaTokenizerFast.from_pretrained(path), vae, device="cpu")
    weights = {
        k: v.contiguous() for k, v in model.state_dict().items() if not k.startswith("audio_vae.")
    }
    save_file(weights, os.path.join(path, "model.safetensors"))
    save_file(
        {k: v.contiguous() for k, v in vae.state_dict().items()},
        os.path.join(path, "audiovae.safetensors"),
    )


@pytest.fixture(scope="session")
def tiny_voxcpm_dir(tmp_path_factory) -> str:
    pytest.importorskip(
        "voxcpm",
        reason="voxcpm is not installed here; run these tests with the VoxCPM environment"
        " (scripts/test.sh runs these in .venvs/tts; see the plugin README)",
    )
    path = tmp_path_factory.mktemp("tiny-voxcpm")
    build_tiny_voxcpm(str(path))
    return str(path)
