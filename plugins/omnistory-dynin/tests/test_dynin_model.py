"""The transformers backend on the stand-in checkout: the real loading path (imports from
source_dir, from_pretrained of model, tokenizer, MAGVIT-v2 and the remote-code speech decoder),
the joint sampler loop and the decoding, in process.  The sequence is shortened here (112 px page
-> 49 codes, 640 prompt tokens) to keep the run fast; the CLI test uses the official sizes."""

from __future__ import annotations

import numpy as np
import pytest
from dynin_standin import SCRIPT_TEXT
from omnistory_dynin.backbone import DyninOmni
from omnistory_testkit import demo_planner_items

from omnistory_core.api import Audio, BackboneOutput, ComponentError

STEPS = 4
SIDE = 112


@pytest.fixture(scope="module")
def items():
    return demo_planner_items(limit=2)


def backbone(source_tree, checkpoints, **params) -> DyninOmni:
    settings = {
        "source_dir": str(source_tree),
        "model": str(checkpoints["model"]),
        "image_codec": str(checkpoints["image_codec"]),
        "speech_codec": str(checkpoints["speech_codec"]),
        "token_layout": checkpoints["layout"],
        "steps": STEPS,
        "image_resolution": SIDE,
        "prompt_length": 640,
        "device": "cpu",
        "local_files_only": True,
        **params,
    }
    return DyninOmni(**settings)


@pytest.fixture(scope="module")
def loaded(source_tree, checkpoints):
    b = backbone(source_tree, checkpoints)
    b.load()
    return b


@pytest.fixture(scope="module")
def first(loaded, items) -> BackboneOutput:
    return loaded.run_one(items[0])


def test_one_joint_pass_makes_text_image_and_speech(loaded, first):
    out = first
    assert isinstance(out, BackboneOutput) and out.failures == {}
    assert out.text == SCRIPT_TEXT
    assert out.image.size == (SIDE, SIDE)
    assert isinstance(out.speech, Audio) and out.speech.sample_rate == 16000
    assert len(out.speech.samples) == 40 * 640  # 40 codes, 40 ms each
    assert np.abs(out.speech.samples).max() <= 1.0
    usage = out.usage
    assert usage["forwards"] == STEPS and usage["passes"] == 1
    assert usage["source_image_codes"] == (SIDE // 16) ** 2 and usage["speech_codes"] == 40
    assert usage["generated_speech_metadata"] == {
        "emotion": "happy",
        "speed": "fast",
        "pitch": "high",
        "gender": "male",
    }
    assert usage["source_revision"].startswith("d6e3ca8")
    model = loaded._parts.model
    assert model.forwards >= STEPS  # one forward per step: this example's 4 among them
    codec = loaded._parts.speech_codec
    assert (
        codec.decoded[-1]["condition"] == "gender-female_emotion-neutral_speed-normal_pitch-normal"
    )
    assert len(codec.decoded[-1]["codes"]) == 40


def test_sampling_is_seeded_per_example(loaded, first, items, source_tree, checkpoints):
    again = loaded.run_one(items[0])
    assert again.usage["seed"] == first.usage["seed"]
    assert np.array_equal(np.asarray(first.image), np.asarray(again.image))
    reseeded = backbone(source_tree, checkpoints, seed=7)
    reseeded._parts = loaded._parts  # same weights, another base seed
    moved = reseeded.run_one(items[0])
    assert moved.usage["seed"] != first.usage["seed"]
    assert not np.array_equal(np.asarray(first.image), np.asarray(moved.image))


def test_too_few_speech_codes_fail_speech_only_when_not_all_or_nothing(
    source_tree, checkpoints, short_speech_model, items
):
    b = backbone(source_tree, checkpoints, model=str(short_speech_model), all_or_nothing=False)
    out = b.run_one(items[0])
    assert out.text == SCRIPT_TEXT and out.image.size == (SIDE, SIDE) and out.speech is None
    assert set(out.failures) == {"speech"}
    assert out.failures["speech"].category == "empty_output"
    assert "speech ended after 3 codes (at least 8 are needed)" in out.failures["speech"].message

    strict = backbone(source_tree, checkpoints, model=str(short_speech_model))
    strict._parts = b._parts
    out = strict.run_one(items[0])
    assert (out.text, out.image, out.speech) == (None, None, None)
    assert set(out.failures) == {"text", "image", "speech"}
    assert {f.category for f in out.failures.values()} == {"empty_output"}
    assert "all_or_nothing=true" in out.failures["text"].message
    assert out.usage["speech_codes"] == 3 and out.usage["discarded"] == ["image", "text"]


def test_an_unknown_speech_style_fails_the_speech(loaded, source_tree, checkpoints, items):
    b = backbone(
        source_tree,
        checkpoints,
        speech_style="gender-female_emotion-bored_speed-normal_pitch-normal",
        all_or_nothing=False,
    )
    b._parts = loaded._parts
    out = b.run_one(items[0])
    assert out.text and out.image is not None and out.speech is None
    assert out.failures["speech"].category == "model_error"
    assert "KeyError" in out.failures["speech"].message


def test_an_example_that_does_not_fit_fails_as_a_whole(loaded, source_tree, checkpoints, items):
    b = backbone(source_tree, checkpoints, prompt_length=64)  # the prompt has ~540 tokens
    b._parts = loaded._parts
    with pytest.raises(ComponentError, match="prompt exceeds 64 tokens"):
        b.run_one(items[0])


def test_the_official_layout_refuses_another_tokenizer(source_tree, checkpoints):
    b = backbone(source_tree, checkpoints, token_layout=None)
    with pytest.raises(ComponentError) as info:
        b.load()
    message = str(info.value)
    assert "expected 126372" in message and "env create backbone=dynin" in message
