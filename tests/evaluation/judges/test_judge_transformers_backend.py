"""The Transformers backend (Audio Flamingo Next's) through its own loading path, with a tiny
MusicFlamingo checkpoint (the model type of nvidia/audio-flamingo-next-hf) built by the
``tiny_checkpoint`` fixture (conftest.py) from a config with random weights."""

from __future__ import annotations

import os

import pytest
from omnistory_eval.judges import CRITERIA, render_prompt
from omnistory_eval.judges.judge import AudioFlamingoNextSpeechJudge

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "MusicFlamingoForConditionalGeneration"):
    pytest.skip("this transformers has no MusicFlamingo", allow_module_level=True)


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
