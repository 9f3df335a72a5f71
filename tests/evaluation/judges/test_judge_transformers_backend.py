"""The Transformers backend (Audio Flamingo Next's) through its own loading path, with a tiny
MusicFlamingo checkpoint (the model type of nvidia/audio-flamingo-next-hf) built here from a
config with random weights."""

from __future__ import annotations

import os

import pytest

from omnistory_core.evaluation.judges import CRITERIA, render_prompt
from omnistory_core.evaluation.judges.judge import AudioFlamingoNextSpeechJudge

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "MusicFlamingoForConditionalGeneration"):
    pytest.skip("this transformers has no MusicFlamingo", allow_module_level=True)

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


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
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


def test_judging_through_the_transformers_loading_path(tiny_checkpoint, item):
    judge = AudioFlamingoNextSpeechJudge(checkpoint=tiny_checkpoint, max_new_tokens=6)
    assert judge.backend_name == "transformers"  # the paper's backend for this judge
    first, second = judge.run_batch([item, item])
    backend = judge._backend
    assert type(backend.model).__name__ == "MusicFlamingoForConditionalGeneration"
    assert type(backend.processor).__name__ == "MusicFlamingoProcessor"
    assert backend.model.dtype == torch.float32  # CPU default
    judge.unload()

    for result in (first, second):
        assert result.detail["inference_status"] == "ok", result.detail
        assert result.detail["backend"] == "transformers"
        assert result.detail["checkpoint"] == tiny_checkpoint
        assert isinstance(result.detail["raw_response"], str)
        assert 1 <= result.detail["usage"]["completion_tokens"] <= 6
        # random weights do not write the rubric's JSON: invalid, and sent to repair if non-empty
        assert result.status == "invalid"
        assert set(result.scores) == set(CRITERIA["speech"])
    assert first.detail["raw_response"] == second.detail["raw_response"]  # seeded, greedy

    # the backend decodes exactly the new tokens of a greedy generate on the rendered prompt
    processor = transformers.AutoProcessor.from_pretrained(tiny_checkpoint)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(tiny_checkpoint)
    messages = render_prompt("speech-audio-flamingo-next", item).messages
    inputs = processor.apply_chat_template(
        [messages], tokenize=True, add_generation_prompt=True, return_dict=True, return_tensors="pt"
    )
    assert first.detail["usage"]["prompt_tokens"] == inputs["input_ids"].shape[1]
    assert "input_features" in inputs  # the candidate audio went through the feature extractor
    out = model.generate(**inputs, max_new_tokens=6, do_sample=False)
    expected = processor.batch_decode(
        out[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True
    )[0].strip()
    assert first.detail["raw_response"] == expected


def test_unreadable_audio_is_an_inference_failure_of_that_item(tiny_checkpoint, item):
    judge = AudioFlamingoNextSpeechJudge(checkpoint=tiny_checkpoint, max_new_tokens=2)
    bad, good = judge.run_batch([dict(item, candidate_speech="/nonexistent/a.wav"), item])
    judge.unload()
    assert bad.detail["inference_status"] == "error"
    assert bad.detail["repair_status"] == "not_eligible"
    assert good.detail["inference_status"] == "ok"


def test_unknown_model_class_is_a_clear_error(tiny_checkpoint, item):
    judge = AudioFlamingoNextSpeechJudge(checkpoint=tiny_checkpoint, model_class="NoSuchAutoClass")
    with pytest.raises(ValueError, match="has no NoSuchAutoClass"):
        judge.run_batch([item])


@pytest.mark.weights
@pytest.mark.gpu
def test_real_audio_flamingo_next(item):
    if not os.environ.get("OMNISTORY_AF_NEXT_CHECKPOINT"):
        pytest.skip(
            "needs nvidia/audio-flamingo-next-hf weights (set OMNISTORY_AF_NEXT_CHECKPOINT)"
        )
    judge = AudioFlamingoNextSpeechJudge(checkpoint=os.environ["OMNISTORY_AF_NEXT_CHECKPOINT"])
    (result,) = judge.run_batch([item])
    assert result.detail["inference_status"] == "ok"
