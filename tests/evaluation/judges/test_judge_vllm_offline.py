"""The vLLM offline backend: engine arguments and prompt preparation (no vLLM needed), and a
GPU test of the real engine that is skipped here."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from judge_test_helpers import expected_text
from omnistory_eval.judges import JUDGE_SPECS, render_prompt
from omnistory_eval.judges.backends.vllm_offline import VLLMOfflineBackend

pytest.importorskip("transformers")


def test_serialized_speech_prompts_go_to_the_engine_as_they_are(item):
    for judge, name in (("speech-kimi-audio-7b", "kimi"), ("speech-moss-audio-8b", "moss")):
        backend = VLLMOfflineBackend(JUDGE_SPECS[judge], {})
        engine_input = backend._engine_input(render_prompt(judge, item))
        assert engine_input["prompt"] == expected_text(f"{name}_audio_prompt.txt")
        audio = engine_input["multi_modal_data"]["audio"]
        # Kimi-Audio takes one (waveform, rate) pair, MOSS-Audio a list of them
        waveform, rate = audio if name == "kimi" else audio[0]
        assert rate == 16000 and waveform.dtype == np.float32 and waveform.shape == (8000,)


def test_internvl_template_input_and_images(item, tiny_checkpoint):
    spec = JUDGE_SPECS["image-internvl35-38b"]
    backend = VLLMOfflineBackend(spec, {"checkpoint": tiny_checkpoint})
    rendered = render_prompt(spec.id, item)
    engine_input = backend._engine_input(rendered)
    prompt = engine_input["prompt"]
    # the checkpoint's chat template received the flattened messages with <image> placeholders
    assert prompt.count("<image>") == 3
    assert prompt.endswith("<|im_start|>assistant\n")
    assert rendered.template_messages[1]["content"] in prompt
    images = engine_input["multi_modal_data"]["image"]
    assert [im.mode for im in images] == ["RGB"] * 3
    assert [im.getpixel((0, 0)) for im in images] == [(0, 80, 120), (40, 80, 120), (80, 80, 120)]


def test_processor_chat_template_for_other_multimodal_judges(item, tiny_checkpoint):
    spec = JUDGE_SPECS["speech-audio-flamingo-next"]  # any non-serialized audio judge
    backend = VLLMOfflineBackend(spec, {"checkpoint": tiny_checkpoint})
    engine_input = backend._engine_input(render_prompt(spec.id, item))
    assert "<sound>" in engine_input["prompt"]
    assert engine_input["prompt"].startswith("<|im_start|>user\nYou are an expert evaluator")
    ((waveform, rate),) = engine_input["multi_modal_data"]["audio"]
    assert rate == 16000 and len(waveform) == 8000


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_missing_vllm_is_a_clear_error(item):
    from omnistory_eval.judges.judge import Qwen3TextJudge

    with pytest.raises(ImportError, match="backend=vllm needs the vllm package.*backend=openai"):
        Qwen3TextJudge().run_batch([item])


@pytest.mark.gpu
@pytest.mark.weights
def test_real_vllm_engine(item):
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("needs vLLM, a GPU and the judge weights")
    from omnistory_eval.judges.judge import Qwen3TextJudge

    judge = Qwen3TextJudge()
    (result,) = judge.run_batch([item])
    judge.unload()
    assert result.detail["inference_status"] == "ok"
