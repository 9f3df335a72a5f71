"""The native implementation on tiny checkpoints, through the plugin's own ``load()``:
transformers' Emu3ForConditionalGeneration / Emu3Processor read from ``save_pretrained`` dirs."""

from __future__ import annotations

import io

import numpy as np
import pytest
from emu3_tiny import ANSWER, TINY_IMAGE_AREA
from omnistory_emu3.backbone import Emu3
from PIL import Image

from omnistory_core.api import BackboneOutput, ComponentError


@pytest.fixture(scope="module")
def fitted(trained_chat, tiny_gen) -> Emu3:
    backbone = Emu3(chat_model=str(trained_chat), gen_model=str(tiny_gen), device="cpu")
    backbone.load()
    return backbone


def test_load_reads_both_checkpoints_with_the_native_classes(fitted, trained_chat, tiny_gen):
    from transformers import Emu3ForConditionalGeneration, Emu3Processor

    engine = fitted.engine
    assert type(engine).__name__ == "NativeEmu3"
    assert isinstance(engine.chat_model, Emu3ForConditionalGeneration)
    assert isinstance(engine.gen_model, Emu3ForConditionalGeneration)
    assert isinstance(engine.gen_processor, Emu3Processor)
    assert engine.chat_model.name_or_path == str(trained_chat)
    assert engine.gen_model.name_or_path == str(tiny_gen)
    assert engine.chat_processor.tokenizer.padding_side == "left"


def test_chat_text_uses_the_checkpoint_chat_template(fitted):
    text = fitted.engine.chat_text("Write the page.")
    assert text == "You are a helpful assistant. USER: <image>Write the page. ASSISTANT:"
    processor = fitted.engine.chat_processor
    template, processor.chat_template = processor.chat_template, None
    try:  # a checkpoint without a template gets the upstream layout
        text = fitted.engine.chat_text("Write the page.")
    finally:
        processor.chat_template = template
    assert text == "You are a helpful assistant. USER: <image>Write the page.. ASSISTANT:"


def test_generation_stage_draws_and_decodes_an_image(fitted, tmp_path):
    """Emu3-Gen on a given t2i: constrained visual tokens -> VQ-VAE decode -> PNG."""
    image, usage = fitted.generate_image("a small fox at a window", seed=0)
    assert isinstance(image, Image.Image) and image.mode == "RGB"
    # image_area from the Gen checkpoint's config: 32 x 32 px = 4 x 4 tokens
    assert image.size == (32, 32)
    assert usage["image_area"] == TINY_IMAGE_AREA and usage["image_tokens"] == [4, 4]
    assert usage["gen_new_tokens"] == 4 * 5 + 3
    path = tmp_path / "generated.png"
    image.save(path)
    with Image.open(path) as saved:
        assert saved.format == "PNG" and saved.size == (32, 32)
        pixels = np.asarray(saved).reshape(-1, 3)
        assert len(np.unique(pixels, axis=0)) > 1  # decoded codes, not a flat fill
    again, _ = fitted.generate_image("a small fox at a window", seed=0)
    assert again.tobytes() == image.tobytes()  # seeded sampling
    other, _ = fitted.generate_image("a small fox at a window", seed=1)
    assert other.tobytes() != image.tobytes()


def test_image_area_and_ratio_parameters_change_the_token_grid(trained_chat, tiny_gen):
    backbone = Emu3(
        chat_model=str(trained_chat),
        gen_model=str(tiny_gen),
        device="cpu",
        image_area=64 * 32,
        ratio="2:1",
    )
    image, usage = backbone.generate_image("a wide meadow", seed=0)
    assert usage["image_tokens"] == [4, 8] and image.size == (64, 32)


def test_too_few_new_tokens_for_an_image_is_an_error(trained_chat, tiny_gen):
    backbone = Emu3(
        chat_model=str(trained_chat), gen_model=str(tiny_gen), device="cpu", gen_max_new_tokens=5
    )
    with pytest.raises(ComponentError, match="gen_max_new_tokens=5 cannot hold a 4x4-token"):
        backbone.generate_image("a fox", seed=0)


def test_run_one_on_the_fitted_chat_model(fitted, items):
    out = fitted.run_one(items[0])
    assert isinstance(out, BackboneOutput)
    assert out.failures == {}
    assert out.text == 'Pip ran to the hill. "Come quick!"'  # the quote put into the narration
    assert out.plan == {
        "speech": {
            "utterance": "Come quick!",
            "speaker": "Narrator",
            "emotion": "neutral",
            "speed": "normal",
            "pitch": "normal",
            "gender": "female",
        }
    }
    assert out.usage["raw_output"] == ANSWER
    assert out.usage["repairs"] == ["quote_appended"]
    assert out.usage["t2i"] == "a small fox at a window"
    assert out.usage["implementation"] == "native"
    assert out.image.size == (32, 32)
    buf = io.BytesIO()
    out.image.save(buf, format="PNG")


def test_greedy_understanding_reads_the_same_answer(trained_chat, tiny_gen, items):
    backbone = Emu3(
        chat_model=str(trained_chat),
        gen_model=str(tiny_gen),
        device="cpu",
        chat_do_sample=False,
        default_voice={"speaker": "Pip", "gender": "male"},
    )
    out = backbone.run_one(items[1])
    assert out.usage["raw_output"] == ANSWER
    assert out.plan["speech"]["speaker"] == "Pip" and out.plan["speech"]["gender"] == "male"


def test_garbage_answers_lose_the_whole_example(tiny_chat, tiny_gen, items):
    backbone = Emu3(
        chat_model=str(tiny_chat), gen_model=str(tiny_gen), device="cpu", chat_max_new_tokens=24
    )
    with pytest.raises(ComponentError) as info:
        backbone.run_one(items[0])
    assert info.value.category in ("plan_json_error", "plan_missing_field")
    assert "answer: " in str(info.value)
    backbone.unload()
    assert backbone.engine is None
