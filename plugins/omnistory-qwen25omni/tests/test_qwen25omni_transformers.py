"""The transformers backend on a tiny checkpoint loaded through the plugin's own ``load()``.

Exercised for real: ``Qwen2_5OmniForConditionalGeneration.from_pretrained`` (thinker, talker,
token2wav, ``spk_dict.pt``), the tokenizer / image processor / feature extractor / chat template
read from the checkpoint, the placeholder expansion, ``generate`` with speech output (thinker ->
talker -> DiT -> BigVGAN, 24 kHz), ``generate`` without it, the forced-speech logits processor, and
both passes with their parsing.  The thinker is a scripted bigram model (see qwen25omni_tiny.py),
so its replies are known; talker and token2wav are random, so the speech is noise of the right
rate and shape.  Where a test needs a model that gives no audio, the loaded model's ``generate``
is wrapped to drop the waveform (the condition the official fallback exists for).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import torch
from omnistory_qwen25omni.backbone import Qwen25OmniBackbone
from omnistory_qwen25omni.prompts import pass1_messages, pass2_messages
from qwen25omni_tiny import IMAGE_PROMPT, NARRATION, QUOTE

from omnistory_core.api import Audio, BackboneOutput, ComponentError, Failure

TINY = {"talker_max_new_tokens": 12, "device": "cpu"}


def loaded(model, **params) -> Qwen25OmniBackbone:
    backbone = Qwen25OmniBackbone(
        model=str(model), seed=params.pop("seed", 0), **{**TINY, **params}
    )
    backbone.load()
    return backbone


@pytest.fixture(scope="module")
def backbone(tiny_qwen25omni):
    b = loaded(tiny_qwen25omni)
    yield b
    b.unload()


def test_load_uses_the_real_classes_and_falls_back_to_sdpa_on_cpu(backbone):
    model = backbone.runner.model
    assert type(model).__name__ == "Qwen2_5OmniForConditionalGeneration"
    assert set(model.speaker_map) == {"Chelsie", "Ethan"}  # spk_dict.pt read by from_pretrained
    assert model.dtype == torch.float32  # dtype=auto: the checkpoint's dtype
    assert backbone.runner.attention == "sdpa"  # flash_attention_2 needs CUDA + flash-attn


def test_two_passes_give_narration_plan_and_24_khz_speech(backbone, demo_items):
    out = backbone.run_one(demo_items[0])
    assert isinstance(out, BackboneOutput)
    assert out.failures == {}
    assert out.text == NARRATION and QUOTE in out.text
    assert out.plan == {"image_prompt": IMAGE_PROMPT}
    assert isinstance(out.speech, Audio) and out.speech.sample_rate == 24000
    assert out.speech.samples.dtype == np.float32 and out.speech.samples.size > 0
    assert np.isfinite(out.speech.samples).all()
    usage = out.usage
    assert usage["passes"] == 2 and usage["quote"] == QUOTE and usage["speech_fallback"] is False
    assert usage["tokens"]["pass1"]["completion"] == 2  # the reply token, then <|im_end|>
    assert usage["tokens"]["pass2"]["prompt"] > usage["tokens"]["pass1"]["prompt"]
    assert usage["json_recovery"] == "brace_slice" and usage["attn_implementation"] == "sdpa"


def test_same_seed_same_speech_other_seed_other_speech(backbone, demo_items):
    first = backbone.run_one(demo_items[1]).speech.samples
    again = backbone.run_one(demo_items[1]).speech.samples
    assert np.array_equal(first, again)  # the example's seed is fixed by the run seed + content
    item = demo_items[1]
    messages = pass1_messages(item["metadata"], item["current_text"], item["conditions"])
    runner = backbone.runner
    a = runner.chat(messages, item["current_image"], None, True, seed=1).speech.samples
    b = runner.chat(messages, item["current_image"], None, True, seed=2).speech.samples
    assert not np.array_equal(a, b)


def test_pass2_inputs_carry_the_speech_as_audio_tokens(backbone, demo_items):
    runner = backbone.runner
    t = np.arange(24000, dtype=np.float32) / 24000
    heard = (0.3 * np.sin(2 * np.pi * 300 * t)).astype(np.float32)
    item = demo_items[0]
    from omnistory_qwen25omni.media import listening_copy, omni_utils_resize

    messages = pass2_messages(item["metadata"], item["current_text"], item["conditions"], QUOTE)
    inputs = runner.inputs.encode(
        messages,
        image=omni_utils_resize(item["current_image"].open_image()),
        audio=listening_copy(heard, 24000),
    )
    ids = inputs["input_ids"][0].tolist()
    tok = runner.inputs.tokenizer
    frames = int(inputs["feature_attention_mask"].sum())
    assert frames == 100  # 1 s at 16 kHz, hop 160
    assert ids.count(tok.convert_tokens_to_ids("<|AUDIO|>")) == 25
    grid = inputs["image_grid_thw"][0]
    assert ids.count(tok.convert_tokens_to_ids("<|IMAGE|>")) == int(grid.prod()) // 4
    assert inputs["input_features"].shape[1] == 16  # mel bins of the tiny feature extractor
    rendered = runner.inputs.render(messages)
    assert rendered.startswith("<|im_start|>system\nYou are Qwen, a virtual human")
    assert rendered.endswith("<|im_start|>assistant\n")
    assert rendered.index("<|AUDIO|>") < rendered.index("<|IMAGE|>")


def test_forced_speech_makes_the_thinker_say_exactly_the_line(backbone):
    runner = backbone.runner
    reply = runner.speak("Come quick, Lena!", seed=3)
    tok = runner.inputs.tokenizer
    expected = tok.encode("Come quick, Lena!", add_special_tokens=False)
    assert reply.generated_ids == [*expected, tok.convert_tokens_to_ids("<|im_end|>")]
    assert reply.text == "Come quick, Lena!"
    assert reply.speech is not None and reply.speech.sample_rate == 24000


@contextmanager
def wrapped_generate(model, wrapper):
    """``model.generate`` replaced by ``wrapper(original, *args, **kwargs)`` for a while."""
    original = model.generate
    model.generate = lambda *args, **kwargs: wrapper(original, *args, **kwargs)
    try:
        yield
    finally:
        del model.generate  # the instance attribute: the class method shows again


def dropping_audio(times: int | None, state: dict):
    """A wrapper whose first ``times`` speech calls (None: all) return the text ids only, as a
    model that produced no audio."""

    def wrapper(original, *args, **kwargs):
        out = original(*args, **kwargs)
        if isinstance(out, tuple) and (times is None or state["dropped"] < times):
            state["dropped"] += 1
            return out[0]
        return out

    return wrapper


def test_pass1_without_audio_falls_back_to_forced_speech(backbone, demo_items):
    state = {"dropped": 0}
    with wrapped_generate(backbone.runner.model, dropping_audio(1, state)):
        out = backbone.run_one(demo_items[0])
    quote_ids = backbone.runner.inputs.tokenizer.encode(QUOTE, add_special_tokens=False)
    assert state["dropped"] == 1
    assert out.failures == {} and out.text == NARRATION
    assert out.speech is not None and out.speech.sample_rate == 24000
    assert out.usage["speech_fallback"] is True and out.usage["passes"] == 3
    assert out.usage["tokens"]["forced_speech"]["completion"] == len(quote_ids) + 1


def test_no_audio_at_all_is_a_speech_failure_and_the_text_survives(backbone, demo_items):
    state = {"dropped": 0}
    with wrapped_generate(backbone.runner.model, dropping_audio(None, state)):
        out = backbone.run_one(demo_items[0])
    assert state["dropped"] == 2  # pass 1 and the forced speech
    assert out.speech is None
    assert out.failures["speech"].category == "backbone_no_speech"
    assert "forced speech" in out.failures["speech"].message
    assert out.text == NARRATION and out.plan == {"image_prompt": IMAGE_PROMPT}
    assert set(out.failures) == {"speech"}


def test_pass2_without_json_fails_the_text_and_keeps_the_speech(
    tiny_qwen25omni_no_json, demo_items
):
    b = loaded(tiny_qwen25omni_no_json)
    try:
        out = b.run_one(demo_items[0])
    finally:
        b.unload()
    assert out.usage["quote"] == "Hurry, Lena, hurry!"
    assert out.text is None and out.plan is None
    assert out.failures["text"].category == "plan_json_error"
    assert "no parseable JSON" in out.failures["text"].message
    assert out.speech is not None and out.speech.sample_rate == 24000


def test_pass1_without_a_line_fails_the_whole_example(tiny_qwen25omni_silent, demo_items):
    b = loaded(tiny_qwen25omni_silent)
    try:
        with pytest.raises(ComponentError) as info:
            b.run_one(demo_items[0])
        batch = b.run_batch(demo_items[:2])
    finally:
        b.unload()
    assert info.value.category == "empty_output"
    assert "pass 1 gave no usable line of dialogue" in str(info.value)
    assert all(isinstance(r, ComponentError) for r in batch)  # per item, not a raised batch


def test_unknown_speaker_is_named_at_load(tiny_qwen25omni):
    b = Qwen25OmniBackbone(model=str(tiny_qwen25omni), seed=0, speaker="Nobody", **TINY)
    with pytest.raises(ComponentError, match="speaker 'Nobody' is not in .*Chelsie, Ethan"):
        b.load()


def test_missing_checkpoint_is_a_load_error(tmp_path):
    b = Qwen25OmniBackbone(model=str(tmp_path / "nothing-here"), seed=0, **TINY)
    with pytest.raises(ComponentError, match="cannot load"):
        b.load()


def test_a_named_speaker_is_passed_to_generate(tiny_qwen25omni, demo_items):
    b = loaded(tiny_qwen25omni, speaker="Ethan")
    seen = []

    def wrapper(original, *args, **kwargs):
        seen.append(kwargs.get("speaker"))
        return original(*args, **kwargs)

    try:
        with wrapped_generate(b.runner.model, wrapper):
            out = b.run_one(demo_items[0])
    finally:
        b.unload()
    assert seen == ["Ethan", None]  # pass 1 speaks; pass 2 makes no speech
    assert not isinstance(out, Failure) and out.speech is not None


@pytest.mark.weights
@pytest.mark.gpu
def test_real_checkpoint(demo_items):
    """The real Qwen/Qwen2.5-Omni-7B (about 22 GB in bf16; downloaded or from
    OMNISTORY_MODEL_BACKBONE_QWEN25OMNI) on one demo example."""
    import os

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (about 31 GB) and the Qwen/Qwen2.5-Omni-7B weights")
    model = os.environ.get("OMNISTORY_MODEL_BACKBONE_QWEN25OMNI", "Qwen/Qwen2.5-Omni-7B")
    b = Qwen25OmniBackbone(model=model, seed=0)
    b.load()
    try:
        out = b.run_one(demo_items[0])
    finally:
        b.unload()
    assert out.usage["quote"] and out.speech is not None and out.speech.sample_rate == 24000
    assert out.speech.samples.size > 24000 * 0.3  # a spoken line, not a click
    assert float(np.abs(out.speech.samples).max()) > 0.01
    if not out.failures:
        assert out.text and out.plan["image_prompt"]
