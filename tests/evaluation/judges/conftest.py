"""Fixtures for the judge tests: the typed example item with real media files, and a tiny
MusicFlamingo checkpoint."""

from __future__ import annotations

import json

import pytest
from judge_test_helpers import DATA, MEDIA_KEYS, make_media


@pytest.fixture
def item_and_names(tmp_path):
    """The example item with real media files, and path -> name as written in the test data."""
    item = json.loads((DATA / "example_item.json").read_text(encoding="utf-8"))
    paths = make_media(tmp_path / "media")
    names = {}
    for key in MEDIA_KEYS:
        names[paths[key]] = item[key]  # e.g. ".../current.png" -> "current.png"
        item[key] = paths[key]
    return item, names


@pytest.fixture
def item(item_and_names):
    return item_and_names[0]


SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<sound>",
    "<|sound_bos|>",
    "<|sound_eos|>",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'text' %}{{ p['text'] }}{% elif p['type'] == 'audio' %}<sound>{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A tiny random MusicFlamingo checkpoint (model type of nvidia/audio-flamingo-next-hf):
    BPE tokenizer with a chat template, Whisper features, one-layer encoder and decoder."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        MusicFlamingoConfig,
        MusicFlamingoForConditionalGeneration,
        MusicFlamingoProcessor,
        PreTrainedTokenizerFast,
        WhisperFeatureExtractor,
    )

    path = tmp_path_factory.mktemp("tiny-audio-flamingo")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        ['You are an expert evaluator. {"score": 8, "rationale": "clear"}'],
        trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=SPECIAL,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL}
    features = WhisperFeatureExtractor(
        feature_size=16, sampling_rate=16000, hop_length=160, chunk_length=1, n_fft=400
    )
    processor = MusicFlamingoProcessor(
        feature_extractor=features, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE
    )
    config = MusicFlamingoConfig(
        audio_config={
            "model_type": "audioflamingo3_encoder",
            "num_mel_bins": 16,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 32,
            "hidden_size": 16,
            "max_source_positions": 50,
        },
        text_config={
            "model_type": "qwen2",
            "vocab_size": tok.get_vocab_size(),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 8192,
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        audio_token_id=ids["<sound>"],
        audio_bos_token_id=ids["<|sound_bos|>"],
        audio_eos_token_id=ids["<|sound_eos|>"],
    )
    torch.manual_seed(0)
    MusicFlamingoForConditionalGeneration(config).save_pretrained(path)
    processor.save_pretrained(path)
    return str(path)
