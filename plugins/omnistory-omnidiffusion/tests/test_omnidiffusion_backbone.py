"""backbone=omnidiffusion's real loading path and per-example behaviour on the stand-ins (see
omnidiffusion_standin.py): ``AutoModel`` / ``AutoTokenizer`` with ``trust_remote_code`` on a
remote-code checkpoint, MAGVIT-v2 and the GLM-4-Voice decoder imported from a checkout-shaped source
tree, and the three passes with their settings, fallbacks and failures.  Omni-Diffusion's own
network and decoders are not exercised (see the weights-marked test at the end)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from omnistory_omnidiffusion.backbone import SAMPLE_RATE, OmniDiffusion
from omnistory_testkit import demo_items
from PIL import Image

from omnistory_core.api import ComponentError

pytestmark = pytest.mark.usefixtures("single_thread")

NO_SPEECH = [
    [
        "IMAGE_PROMPT",
        "NARRATION: Pip taps the glass.\nSPEAKER: Pip\nIMAGE_PROMPT: A fox at a window.",
    ],
    ["SPEECH", "SPEAKER: Lena\nI have nothing to say."],
]
RECOVERED = [NO_SPEECH[0], ["SPEECH", "SPEAKER: Lena\nSPEECH: Wait for me!"]]
NO_NARRATION = [["IMAGE_PROMPT", "SPEAKER: Pip\nSPEECH: Come quick!\nIMAGE_PROMPT: A fox."]]
NO_IMAGE_PROMPT = [
    ["IMAGE_PROMPT", "NARRATION: Pip taps the glass.\nSPEAKER: Pip\nSPEECH: Come quick!"]
]


@pytest.fixture(scope="module")
def items():
    return demo_items(2)


def loaded(standin: dict[str, Path], model: Path | None = None, **params) -> OmniDiffusion:
    backbone = OmniDiffusion(
        source_dir=str(standin["source_dir"]),
        model=str(model or standin["model"]),
        image_tokenizer=str(standin["image_tokenizer"]),
        audio_decoder=str(standin["audio_decoder"]),
        seed=params.pop("seed", 0),
        **params,
    )
    backbone.load()
    return backbone


@pytest.fixture(scope="module")
def omni(standin):
    backbone = loaded(standin)
    yield backbone
    backbone.unload()


def test_loads_remote_code_and_the_checkout_glue(omni, standin):
    model = omni.model
    assert type(model).__name__ == "DreamModel"
    assert type(model).__module__.startswith("transformers_modules.")  # from the checkpoint
    source = standin["source_dir"].resolve()

    def origin(obj) -> Path:
        return Path(sys.modules[type(obj).__module__].__file__).resolve()

    assert origin(omni.magvit) == source / "omni_diffusion/models/magvit/modeling_magvitv2.py"
    assert origin(omni.decoder) == source / "third_party/GLM-4-Voice/flow_inference.py"
    assert omni.device == "cpu" and str(model.dtype) == "torch.float32"  # dtype=auto on the CPU
    tokenizer = omni.tokenizer
    assert omni.audio_0 == tokenizer.convert_tokens_to_ids("<|audio_0|>")
    assert omni.image_0 == tokenizer.convert_tokens_to_ids("<|image_0|>") == omni.audio_0 + 64


def test_one_example_is_three_passes_with_the_official_settings(omni, items):
    omni.model.calls.clear()
    omni.decoder.calls.clear()
    out = omni.run_one(items[0])
    plan, t2i, tts = omni.model.calls
    shared = {
        "temperature": 0.0,
        "top_p": 0.9,
        "add_boa_token": 0,
        "output_text_only": False,
        "inputs_is_none": True,
    }
    assert {k: plan[k] for k in shared} == shared == {k: tts[k] for k in shared}
    assert (
        plan["task"],
        plan["max_new_tokens"],
        plan["steps"],
        plan["alg"],
        plan["repeat_penalty"],
        plan["max_position_penalty"],
        plan["cfg"],
    ) == ("", 192, 192, "entropy", 1.05, 1.0, 0.0)
    assert (
        t2i["task"],
        t2i["max_new_tokens"],
        t2i["steps"],
        t2i["alg"],
        t2i["repeat_penalty"],
        t2i["max_position_penalty"],
        t2i["cfg"],
    ) == ("T2I", 260, 260, "entropy-penalty", 1.2, 2.0, 0.0)
    assert (
        tts["task"],
        tts["max_new_tokens"],
        tts["steps"],
        tts["alg"],
        tts["repeat_penalty"],
        tts["max_position_penalty"],
    ) == ("TTS", 64, 32, "entropy", 1.0, 1.0)
    # prompts: ChatML user turns; the page (512 px -> 8 x 8 stand-in codes) after the planning text
    assert plan["prompt"].startswith("<|im_start|>user\nYou are continuing a children's")
    assert plan["prompt"].endswith("<|end_of_image|><|im_end|>\n<|im_start|>assistant\n")
    assert plan["prompt"].count("<|image_") == 64
    assert "Picture of the current page:\n<|begin_of_image|>" in plan["prompt"]
    assert t2i["prompt"].startswith(
        "<|im_start|>user\nGenerate an image based on the provided "
        "text description.\nAn illustration for a children's picture "
        "book. A fox at a window. Narration: Pip taps the glass."
    )
    assert "<|image_" not in t2i["prompt"]
    assert tts["prompt"] == (
        "<|im_start|>user\nConvert the text to speech.\nCome quick!"
        "<|im_end|>\n<|im_start|>assistant\n"
    )
    # outputs
    assert out.text == "Pip taps the glass." and out.failures == {}
    assert isinstance(out.image, Image.Image) and out.image.size == (64, 64)  # 16 x 16 codes x 4
    assert out.image.mode == "RGB" and float(np.asarray(out.image).std()) > 0
    assert out.speech.sample_rate == SAMPLE_RATE == 22050
    assert out.speech.samples.dtype == np.float32 and out.speech.samples.shape == (24 * 2 * 256,)
    (decode,) = omni.decoder.calls
    assert len(decode["codes"][0]) == 24 and all(0 <= c < 64 for c in decode["codes"][0])
    assert (
        decode["finalize"],
        decode["option_steps"],
        decode["prompt_token"],
        decode["prompt_feat"],
    ) == (True, 10, (1, 0), (1, 0, 80))
    assert out.plan["raw"].startswith("NARRATION: Pip taps the glass.")
    assert out.plan["speaker"] == "Pip" and out.plan["fallbacks"] == []
    assert out.plan["t2i_prompt"] in t2i["prompt"]
    assert out.usage["passes"] == 3 and out.usage["image_codes"] == 256
    assert out.usage["audio_codes"] == 24


def test_speech_is_reproducible_from_the_load_seed(standin, items):
    fast = {"plan_steps": 8, "image_steps": 8, "speech_steps": 4}
    first = loaded(standin, **fast).run_one(items[1]).speech.samples
    again = loaded(standin, **fast).run_one(items[1]).speech.samples
    other = loaded(standin, load_seed=7, **fast).run_one(items[1]).speech.samples
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)  # the decoder's noise comes from the seeded RNG


def test_missing_speech_line_official_fallback_and_none(standin, make_variant, items):
    model = make_variant("no-speech", responses=NO_SPEECH)
    official = loaded(standin, model)
    out = official.run_one(items[0])
    tasks = [call["task"] for call in official.model.calls]
    assert tasks == ["", "", "T2I", "TTS"]  # planning, recovery, image, speech
    recovery = official.model.calls[1]
    assert (recovery["max_new_tokens"], recovery["steps"], recovery["alg"]) == (80, 80, "entropy")
    assert "Planned text of the next page:\nPip taps the glass." in recovery["prompt"]
    assert recovery["prompt"].count("<|image_") == 64  # the page is shown again
    assert official.model.calls[3]["prompt"].endswith(
        "speech.\nLet's keep going.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert out.failures == {} and out.speech is not None
    assert out.plan["speech"] == "Let's keep going." and out.plan["speaker"] == "Pip"
    assert out.plan["fallbacks"] == ["speech"] and out.plan["recovery_raw"].startswith("SPEAKER")

    strict = loaded(standin, model, fallbacks="none")
    out = strict.run_one(items[0])
    assert [call["task"] for call in strict.model.calls] == ["", "", "T2I"]  # no TTS pass
    assert out.speech is None and out.failures["speech"].category == "plan_missing_field"
    assert "SPEECH" in out.failures["speech"].message
    assert out.text == "Pip taps the glass." and isinstance(out.image, Image.Image)
    assert out.plan["fallbacks"] == []


def test_recovery_pass_supplies_the_spoken_line(standin, make_variant, items):
    backbone = loaded(standin, make_variant("recovered", responses=RECOVERED), fallbacks="none")
    out = backbone.run_one(items[0])
    assert out.failures == {} and out.plan["speech"] == "Wait for me!"
    assert out.plan["speaker"] == "Pip"  # the first answer's speaker is kept
    assert backbone.model.calls[-1]["prompt"].count("Wait for me!") == 1


def test_missing_narration(standin, make_variant, items):
    model = make_variant("no-narration", responses=NO_NARRATION)
    out = loaded(standin, model).run_one(items[0])
    goal = items[0]["conditions"]["text_instruction"]
    assert out.text == goal and out.plan["fallbacks"] == ["narration"] and out.failures == {}
    strict = loaded(standin, model, fallbacks="none")
    out = strict.run_one(items[0])
    assert out.text is None and out.failures["text"].category == "plan_missing_field"
    assert isinstance(out.image, Image.Image) and out.speech is not None
    assert "Narration:" not in strict.model.calls[1]["prompt"]


def test_missing_image_prompt_is_synthesised_officially(standin, make_variant, items):
    model = make_variant("no-image-prompt", responses=NO_IMAGE_PROMPT)
    out = loaded(standin, model).run_one(items[0])
    assert out.plan["fallbacks"] == ["image_prompt"]
    assert out.plan["t2i_prompt"].count("Scene: ") == 2  # the official nesting
    out = loaded(standin, model, fallbacks="none").run_one(items[0])
    assert out.plan["t2i_prompt"].count("Scene: ") == 1 and out.failures == {}


def test_no_image_tokens_is_an_image_failure_only(standin, make_variant, items):
    backbone = loaded(
        standin, make_variant("no-image", t2i_image_tokens=0, default_response="I cannot draw.")
    )
    out = backbone.run_one(items[0])
    assert out.image is None and out.failures["image"].category == "backbone_no_image"
    assert out.text == "Pip taps the glass." and out.speech is not None
    assert out.usage["image_codes"] == 0


def test_no_audio_tokens_is_a_speech_failure_only(standin, make_variant, items):
    backbone = loaded(standin, make_variant("no-audio", tts_audio_tokens=0))
    out = backbone.run_one(items[0])
    assert out.speech is None and out.failures["speech"].category == "backbone_no_speech"
    assert out.text and isinstance(out.image, Image.Image)


def test_an_exception_loses_the_whole_example(standin, make_variant, items):
    backbone = loaded(standin, make_variant("tts-crash", fail_task="TTS"))
    with pytest.raises(
        ComponentError, match="RuntimeError: stand-in failure in task 'TTS'"
    ) as info:
        backbone.run_one(items[0])
    assert info.value.category == "model_error"


def test_load_errors_name_what_failed(standin, tmp_path):
    with pytest.raises(ComponentError, match="cannot load the GLM-4-Voice decoder"):
        OmniDiffusion(
            source_dir=str(standin["source_dir"]),
            model=str(standin["model"]),
            image_tokenizer=str(standin["image_tokenizer"]),
            audio_decoder=str(tmp_path / "missing"),
            seed=0,
        ).load()
    broken = tmp_path / "broken"
    shutil.copytree(standin["source_dir"], broken)
    (broken / "third_party/GLM-4-Voice/flow_inference.py").write_text("import cosyvoice.nothing\n")
    with pytest.raises(ComponentError, match="cannot import Omni-Diffusion's code") as info:
        OmniDiffusion(source_dir=str(broken), model=str(standin["model"]), seed=0).load()
    assert "env create backbone=omnidiffusion" in str(info.value)


@pytest.mark.weights
@pytest.mark.gpu
def test_real_omni_diffusion():
    """The real lijiang/Omni-Diffusion, MAGVIT-v2 and GLM-4-Voice decoder on a GPU, in the
    Omni-Diffusion environment, with a real checkout in OMNISTORY_SOURCE_BACKBONE_OMNIDIFFUSION."""
    torch = pytest.importorskip("torch")
    source = os.environ.get("OMNISTORY_SOURCE_BACKBONE_OMNIDIFFUSION")
    if not torch.cuda.is_available() or not source:
        pytest.skip(
            "needs a CUDA GPU, the Omni-Diffusion environment and weights, and "
            "OMNISTORY_SOURCE_BACKBONE_OMNIDIFFUSION pointing at a checkout"
        )
    backbone = OmniDiffusion(source_dir=source, seed=0)
    backbone.load()
    item = demo_items(1)[0]
    out = backbone.run_one(item)
    assert out.text and isinstance(out.image, Image.Image) and out.image.size == (256, 256)
    assert out.speech is not None and out.speech.sample_rate == 22050
