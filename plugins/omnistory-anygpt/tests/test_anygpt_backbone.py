"""The backbone's real loading and calling code on the stand-in checkout and tiny checkpoints."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from anygpt_standin import (
    CODES_PER_IMAGE,
    DECODED_SIZE,
    HOP,
    IMAGE_ANSWER,
    SAMPLE_RATE,
    SPEECH_ANSWER,
)
from omnistory_anygpt.backbone import AnyGPT

from omnistory_core.api import Audio, ComponentError


def backbone(standin, chat: Path, **params) -> AnyGPT:
    settings = {
        "source_dir": str(standin["source_dir"]),
        "model": str(chat),
        "image_tokenizer": str(standin["image_tokenizer"]),
        "image_decoder": str(standin["image_decoder"]),
        "speech_modules": str(standin["speech_modules"]),
        "dtype": "float32",
        "device": "cpu",
        "seed": 0,
        **params,
    }
    return AnyGPT(**settings)


def calls(module: str) -> list:
    return sys.modules[module].CALLS


def clear_calls() -> None:
    for module in (
        "seed2.seed_llama_tokenizer",
        "soundstorm_speechtokenizer.soundstorm",
        "speechtokenizer.model",
    ):
        if module in sys.modules:
            sys.modules[module].CALLS.clear()


@pytest.fixture(scope="module")
def loaded(standin, chat_models):
    model = backbone(standin, chat_models())
    model.load()
    yield model
    model.unload()


def test_one_example_makes_narration_picture_and_speech(loaded, standin, demo_items) -> None:
    init = [c for name, c in calls("seed2.seed_llama_tokenizer") if name == "init"][-1]
    clear_calls()
    out = loaded.run_one(demo_items[0])
    assert out.failures == {}
    # official parsing: the quoted spoken line is cut out of the narration, its label stays
    assert out.text == "Pip finds a red kite in the tall grass. Speech:"
    assert out.usage["speech_line"] == "Look what I found!"
    assert out.image.size == (DECODED_SIZE, DECODED_SIZE)
    assert isinstance(out.speech, Audio) and out.speech.sample_rate == SAMPLE_RATE
    assert out.speech.samples.shape == (len(SPEECH_ANSWER) * HOP,)
    assert out.speech.samples.dtype == np.float32
    assert out.usage["passes"] == 3
    assert out.usage["image_segments"] == out.usage["speech_segments"] == 1

    # what reached the upstream code: the loading arguments and the runner's decode settings
    assert init["image_size"] == 224 and init["load_diffusion"] is True
    assert init["diffusion_model_path"] == str(standin["image_decoder"])
    assert init["model_path"] == str(standin["image_tokenizer"] / "seed_quantizer.pt")
    assert init["fp16"] is False  # follows dtype (float16 by default)
    (encode,) = [c for name, c in calls("seed2.seed_llama_tokenizer") if name == "encode"]
    assert encode["shape"] == (1, 3, 224, 224)
    (decode,) = [c for name, c in calls("seed2.seed_llama_tokenizer") if name == "decode"]
    assert decode["codes"] == [list(IMAGE_ANSWER)] and decode["negative_indices"] is None
    assert (decode["guidance_scale"], decode["num_inference_steps"]) == (10.0, 20)
    (storm,) = calls("soundstorm_speechtokenizer.soundstorm")
    assert storm[1] == {"steps": 3, "greedy": True, "prompt": False, "codes": [list(SPEECH_ANSWER)]}


def test_prompts_use_the_chat_template_and_the_image_tokens(loaded, demo_items) -> None:
    tokens = loaded.encode_image(demo_items[0]["current_image"].open_image())
    assert tokens.startswith("<soim>") and tokens.endswith("<eoim>")
    assert tokens.count("<\U0001f440") == CODES_PER_IMAGE
    text = loaded.prompt("hello", response_prefix="Narration:")
    assert text.endswith("[Human]: hello<eoh>\n[MMGPT]: Narration:")
    assert loaded.prompt("draw", force="image").endswith("[MMGPT]: <soim>")
    assert loaded.prompt("say", force="speech").endswith("[MMGPT]: <sosp>")


def test_the_seed_makes_each_example_reproducible_on_its_own(
    loaded, standin, chat_models, demo_items
) -> None:
    first = loaded.run_one(demo_items[0])
    loaded.run_one(demo_items[1])  # another example in between changes nothing
    again = loaded.run_one(demo_items[0])
    assert np.array_equal(first.speech.samples, again.speech.samples)
    assert first.usage["seed"] == again.usage["seed"] != loaded.run_one(demo_items[1]).usage["seed"]
    other = backbone(standin, chat_models(), seed=1)
    other.load()
    moved = other.run_one(demo_items[0])
    other.unload()
    # SoundStorm's sampling draws from the seeded stream; the image decode is deterministic
    assert not np.array_equal(first.speech.samples, moved.speech.samples)
    assert np.array_equal(np.asarray(first.image), np.asarray(moved.image))


def test_lines_parsing_keeps_the_narration_clean(standin, chat_models, demo_items) -> None:
    model = backbone(standin, chat_models(), parsing="lines")
    out = model.run_one(demo_items[0])  # loads on first use
    assert out.text == "Pip finds a red kite in the tall grass."
    assert out.usage["speech_line"] == "Look what I found!"


def test_a_missing_image_run_fails_the_image_only(standin, chat_models, demo_items) -> None:
    out = backbone(standin, chat_models(image="unclosed")).run_one(demo_items[0])
    assert out.image is None
    assert out.failures["image"].category == "backbone_no_image"
    assert "no <soim>...<eoim> run" in out.failures["image"].message
    assert set(out.failures) == {"image"}
    assert out.text and isinstance(out.speech, Audio)


def test_an_exception_in_the_speech_pass_keeps_text_and_image(
    standin, chat_models, demo_items
) -> None:
    out = backbone(standin, chat_models(speech="empty")).run_one(demo_items[0])
    assert out.text == "Pip finds a red kite in the tall grass. Speech:"
    assert out.image is not None and out.speech is None
    assert set(out.failures) == {"speech"}
    failure = out.failures["speech"]
    assert failure.category == "model_error"
    assert failure.message == "the speech pass: ValueError: no semantic tokens to complete"


def test_an_exception_in_the_image_pass_leaves_speech_unmade(
    standin, chat_models, demo_items
) -> None:
    # as in the runner: the exception ends the example, the narration already made is kept
    out = backbone(standin, chat_models(image="empty")).run_one(demo_items[0])
    assert out.text and out.image is None and out.speech is None
    assert out.failures["image"].category == "model_error"
    assert "SEED decodes 32 codes, got 0" in out.failures["image"].message
    assert out.failures["speech"].category == "upstream_failed"
    assert out.failures["speech"].message.startswith("not made: the image pass raised")
    assert "text" not in out.failures


def test_load_errors_are_component_errors(standin, chat_models, tmp_path: Path) -> None:
    model = backbone(standin, chat_models(), speech_modules=str(tmp_path / "missing"))
    with pytest.raises(ComponentError, match="cannot load AnyGPT's checkpoints: FileNotFoundError"):
        model.load()
    broken = shutil.copytree(standin["source_dir"], tmp_path / "broken")
    (broken / "anygpt" / "src" / "infer" / "voice_clone.py").write_text("import no_such_module\n")
    with pytest.raises(ComponentError, match="cannot import AnyGPT's code .*no_such_module"):
        backbone(standin, chat_models(), source_dir=str(broken)).load()


def test_the_modules_come_from_the_configured_checkout(standin, chat_models, tmp_path) -> None:
    copy = shutil.copytree(standin["source_dir"], tmp_path / "second")
    model = backbone(standin, chat_models(), source_dir=str(copy))
    model.load()
    for name in ("seed2.seed_llama_tokenizer", "m_utils.conversation", "infer.voice_clone"):
        assert Path(sys.modules[name].__file__).is_relative_to(copy.resolve()), name
    model.unload()
    backbone(standin, chat_models()).load()  # and back
    assert Path(sys.modules["m_utils.conversation"].__file__).is_relative_to(
        Path(standin["source_dir"]).resolve()
    )


@pytest.mark.weights
@pytest.mark.gpu
def test_real_anygpt_checkpoints(demo_items) -> None:
    """The real AnyGPT-chat, SEED, unCLIP, SpeechTokenizer and SoundStorm on a GPU, in AnyGPT's
    environment (transformers 4.34.1), from a checkout named by OMNISTORY_SOURCE_BACKBONE_ANYGPT."""
    import os

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    source = os.environ.get("OMNISTORY_SOURCE_BACKBONE_ANYGPT")
    if not torch.cuda.is_available() or not source:
        pytest.skip(
            "needs a CUDA GPU, the AnyGPT checkout (OMNISTORY_SOURCE_BACKBONE_ANYGPT) "
            "and the hub checkpoints"
        )
    if transformers.__version__ != "4.34.1":
        pytest.skip("run in AnyGPT's environment (transformers 4.34.1), see the README")
    model = AnyGPT(source_dir=source, seed=0)
    out = model.run_one(demo_items[0])
    model.unload()
    assert out.text, out.failures
    assert out.image is None or out.image.size == (768, 768)
    assert out.speech is None or out.speech.sample_rate == 16000
