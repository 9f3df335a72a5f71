"""Fixtures for the Parler model tests: a tiny random Parler-TTS checkpoint built locally.

Nothing here imports torch or parler_tts at module import, so the pure tests also run in an
environment without the model stack.
"""

from __future__ import annotations

import os

import pytest

# The tests must never reach a hub; set before transformers/huggingface_hub are imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Decoder special ids follow the real checkpoints' layout: codes 0..1023, pad = eos = 1024, bos
# = 1025.  The vocabulary stops at bos so that a random decoder cannot sample an id the codec
# cannot decode (the real model was trained never to emit its unused ids).
CODEBOOK_SIZE = 1024
PAD = EOS = 1024
BOS = 1025
TOKENIZER_CORPUS = [
    "Jon speaks quite fast with a low pitch, in a very expressive and animated voice that sounds "
    "angry and forceful. The recording is very clear audio with almost no background noise.",
    "Lea speaks quite slowly with a high pitch, in a quite monotone voice that sounds sad.",
    "Look, a boat! Where did the little bear go? Come back here, please.",
]


def build_tokenizer():
    """A byte-level BPE tokenizer trained on a few sentences (any text is encodable)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<pad>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(TOKENIZER_CORPUS, trainer)
    # T5-style: every sequence ends with </s>.
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )


def build_tiny_parler(path: str) -> None:
    """Save a random ParlerTTSForConditionalGeneration (tiny T5 encoder, DAC codec with 2
    codebooks, 1-layer decoder) and its tokenizer into ``path``."""
    import torch
    from parler_tts import (
        ParlerTTSConfig,
        ParlerTTSDecoderConfig,
        ParlerTTSForConditionalGeneration,
    )
    from parler_tts.dac_wrapper import DACConfig
    from transformers import T5Config

    tokenizer = build_tokenizer()
    text_encoder = T5Config(
        vocab_size=len(tokenizer),
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=1,
        num_heads=2,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    # DACConfig sizes only the quantizer; the codec's conv stacks keep their real size (~60M
    # parameters), which is what keeps this test on the real decoding path.
    audio_encoder = DACConfig(num_codebooks=2, codebook_size=CODEBOOK_SIZE, latent_dim=8)
    decoder = ParlerTTSDecoderConfig(
        vocab_size=BOS + 1,
        max_position_embeddings=256,
        num_hidden_layers=1,
        ffn_dim=32,
        num_attention_heads=2,
        hidden_size=16,
        num_codebooks=2,
        # Large initial weights give sharp logits, so that a different description or text
        # changes the sampled codes (with the default 0.02 every input samples the same codes).
        initializer_factor=1.0,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
    )
    config = ParlerTTSConfig.from_sub_models_config(
        text_encoder,
        audio_encoder,
        decoder,
        vocab_size=len(tokenizer),
        decoder_start_token_id=BOS,
        pad_token_id=PAD,
    )
    torch.manual_seed(0)
    model = ParlerTTSForConditionalGeneration(config)
    gen = model.generation_config
    gen.decoder_start_token_id, gen.bos_token_id = BOS, BOS
    gen.pad_token_id, gen.eos_token_id = PAD, EOS
    gen.do_sample, gen.max_length = True, 64
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


@pytest.fixture(scope="session")
def tiny_parler_dir(tmp_path_factory) -> str:
    pytest.importorskip(
        "parler_tts",
        reason="parler-tts is not installed here; run these tests with the Parler environment"
        " (scripts/test.sh runs these in .venvs/tts; see the plugin README)",
    )
    path = tmp_path_factory.mktemp("tiny-parler")
    build_tiny_parler(str(path))
    return str(path)
