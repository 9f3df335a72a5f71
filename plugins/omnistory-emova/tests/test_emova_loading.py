"""EMOVA's loading path and both passes on tiny checkpoints with stand-in remote code.

Exercised: ``AutoModel`` / ``AutoProcessor`` with ``trust_remote_code=True`` resolving the classes
named in the checkpoints' ``auto_map``, the speech tokenizer loaded in float32 and handed to
``processor.set_speech_tokenizer``, Hugging Face's ``generate`` with the plugin's settings and
its speech-unit logits processor, ``batch_decode(..., speaker=..., output_wav_prefix=...)``
writing the wav, and the per-modality failures.  Not exercised: EMOVA's own remote code and
weights (see the weights-marked test at the end and emova_tiny.py).
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from emova_tiny import SAMPLING_RATE, SPEECH_REPLY, TINY_SPEECH_UNITS, build_tiny_speech_tokenizer
from omnistory_emova.backbone import Emova, pass2_messages
from omnistory_testkit import demo_items

from omnistory_core.api import Audio, BackboneOutput, ComponentError

TINY = {"dtype": "float32", "device": "cpu"}
TEXT = "Pip tapped on the glass and told Lena the moon had tumbled into the pond."
QUOTE = "Hurry, Lena, the moon fell into the pond!"
T2I = (
    "A small orange fox tapping on a dark bedroom window at night, a girl turning towards "
    "him, flat shapes, night colours"
)


def demo_item(index: int = 0) -> dict:
    return demo_items(index + 1)[index]


def loaded(model, speech_tokenizer, **params) -> Emova:
    backbone = Emova(
        model=str(model), speech_tokenizer=str(speech_tokenizer), seed=0, **{**TINY, **params}
    )
    backbone.load()
    return backbone


@pytest.fixture(scope="module")
def emova(tiny_emova, tiny_speech_tokenizer):
    backbone = loaded(tiny_emova, tiny_speech_tokenizer)
    yield backbone
    backbone.unload()


def test_remote_code_classes_are_loaded(emova, tiny_speech_tokenizer):
    import torch

    runtime = emova.runtime
    assert type(runtime.model).__name__ == "EMOVAForConditionalGeneration"
    assert type(runtime.model).__module__.startswith("transformers_modules.")
    assert type(runtime.processor).__name__ == "EMOVAProcessor"
    speech = runtime.processor.speech_tokenizer
    assert type(speech).__name__ == "EMOVASpeechTokenizer"
    assert speech.name_or_path == str(tiny_speech_tokenizer) and speech.dtype == torch.float32
    assert runtime.model.dtype == torch.float32 and runtime.device == "cpu"
    assert sorted(runtime.unit_ids.values()) == list(range(TINY_SPEECH_UNITS))
    assert runtime.stop_ids == [runtime.processor.tokenizer.convert_tokens_to_ids("<|im_end|>")]


def test_default_dtype_is_bfloat16_with_a_float32_speech_tokenizer(
    tiny_emova, tiny_speech_tokenizer
):
    import torch

    backbone = loaded(tiny_emova, tiny_speech_tokenizer, dtype="bfloat16")
    assert backbone.runtime.model.dtype == torch.bfloat16
    assert backbone.runtime.processor.speech_tokenizer.dtype == torch.float32
    out = backbone.run_one(demo_item())
    assert out.text == TEXT and isinstance(out.speech, Audio) and not out.failures


def test_one_call_makes_narration_speech_and_the_image_prompt(emova):
    out = emova.run_one(demo_item())
    assert isinstance(out, BackboneOutput)
    assert out.text == TEXT and out.plan == {"image_prompt": T2I} and out.image is None
    assert out.failures == {}
    assert isinstance(out.speech, Audio) and out.speech.sample_rate == SAMPLING_RATE
    samples = out.speech.samples
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert samples.size == 8 * 64  # 8 units x 64 samples in the stand-in decoder
    assert float(np.abs(samples).max()) <= 1.0 and float(np.abs(samples).std()) > 0.01
    assert out.usage["speech_units"] == 8 and out.usage["quote"] == QUOTE
    assert out.usage["passes"] == 2 and out.usage["prompt_tokens"] > 100


def test_greedy_outputs_are_reproducible(emova, tiny_emova, tiny_speech_tokenizer):
    first = emova.run_one(demo_item())
    again = loaded(tiny_emova, tiny_speech_tokenizer).run_one(demo_item())
    assert first.text == again.text
    assert np.array_equal(first.speech.samples, again.speech.samples)


def test_the_speaker_parameter_picks_the_voice(emova, tiny_emova, tiny_speech_tokenizer):
    female = emova.run_one(demo_item()).speech.samples
    male = loaded(tiny_emova, tiny_speech_tokenizer, speaker="male").run_one(demo_item())
    assert male.speech.samples.shape == female.shape
    assert not np.allclose(male.speech.samples, female)


def test_speech_units_only_keeps_the_allowed_logits():
    import torch
    from omnistory_emova.runtime import SpeechUnitsOnly

    scores = torch.randn(2, 10)
    scores[:, 7] = 100.0  # the model's favourite is not allowed
    out = SpeechUnitsOnly([1, 3, 3, 12])(torch.zeros(2, 4, dtype=torch.long), scores)
    assert torch.equal(out[:, [1, 3]], scores[:, [1, 3]])  # allowed logits untouched
    others = [i for i in range(10) if i not in (1, 3)]
    assert torch.isneginf(out[:, others]).all()  # 12 is past the vocabulary: ignored
    assert set(out.argmax(dim=-1).tolist()) <= {1, 3}
    with pytest.raises(ValueError):
        SpeechUnitsOnly([])


def test_the_speech_pass_can_only_emit_speech_units(chatty_emova, tiny_speech_tokenizer):
    """The model would answer the speech prompt with words; restricted, it speaks units."""
    backbone = loaded(chatty_emova, tiny_speech_tokenizer, speech_max_new_tokens=6)
    runtime = backbone.runtime
    free, _ = runtime._generate(pass2_messages(QUOTE), None, max_new_tokens=6)
    assert runtime.processor.batch_decode(free, skip_special_tokens=True)[0].startswith("hello")
    from transformers import LogitsProcessorList

    restricted, _ = runtime._generate(
        pass2_messages(QUOTE),
        None,
        max_new_tokens=6,
        logits_processor=LogitsProcessorList([runtime.units_only]),
    )
    tokens = restricted[0].tolist()
    units = [t for t in tokens if t in runtime.unit_ids]
    assert units and tokens[: len(units)] == units  # speech units, then at most EOS
    assert tokens[len(units) :] in ([], runtime.stop_ids)
    audio, usage = runtime.speak(pass2_messages(QUOTE), speaker="female", max_new_tokens=6)
    assert usage["speech_units"] == len(units) and audio.samples.size == len(units) * 64
    out = backbone.run_one(demo_item())
    assert out.failures == {} and out.usage["speech_units"] == len(units)


def test_no_speech_units_is_a_speech_failure_and_the_text_survives(
    mute_emova, tiny_speech_tokenizer
):
    out = loaded(mute_emova, tiny_speech_tokenizer).run_one(demo_item())
    assert out.speech is None and set(out.failures) == {"speech"}
    assert out.failures["speech"].category == "empty_output"
    assert "no speech units" in out.failures["speech"].message
    assert out.text == TEXT and out.plan == {"image_prompt": T2I}


def test_a_decode_error_is_a_speech_failure_and_the_text_survives(tiny_emova, tmp_path):
    small = build_tiny_speech_tokenizer(tmp_path / "speech-4-units", num_units=4)
    out = loaded(tiny_emova, small).run_one(demo_item())  # SPEECH_REPLY uses units up to 29
    assert "<|speech_29|>" in SPEECH_REPLY
    assert out.speech is None and out.failures["speech"].category == "model_error"
    assert "ValueError: speech units out of range" in out.failures["speech"].message
    assert out.text == TEXT and out.plan == {"image_prompt": T2I}


def test_json_without_t2i_fails_the_whole_example(no_t2i_emova, tiny_speech_tokenizer):
    backbone = loaded(no_t2i_emova, tiny_speech_tokenizer)
    with pytest.raises(ComponentError, match="no usable t2i") as info:
        backbone.run_one(demo_item())
    assert info.value.category == "plan_missing_field"


def test_missing_speech_tokenizer_package_is_explained(tiny_emova, tiny_speech_tokenizer, tmp_path):
    copy = shutil.copytree(tiny_speech_tokenizer, tmp_path / "needs-package")
    modeling = copy / "modeling_speech_tokenizer.py"
    modeling.write_text("import emova_speech_tokenizer  # noqa\n" + modeling.read_text())
    backbone = Emova(model=str(tiny_emova), speech_tokenizer=str(copy), seed=0, **TINY)
    with pytest.raises(ComponentError, match="(?s)speech tokenizer.*pip install -e"):
        backbone.load()


def test_missing_checkpoint_is_named(tiny_speech_tokenizer, tmp_path):
    backbone = Emova(
        model=str(tmp_path / "nowhere"), speech_tokenizer=str(tiny_speech_tokenizer), seed=0, **TINY
    )
    with pytest.raises(ComponentError, match="cannot load .*nowhere"):
        backbone.load()


@pytest.mark.weights
@pytest.mark.gpu
def test_real_emova_checkpoint():
    """The real EMOVA-7B and speech tokenizer (downloaded; needs emova_speech_tokenizer)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU, the hub (or local copies) and the EMOVA environment")
    pytest.importorskip(
        "emova_speech_tokenizer",
        reason="the git-only EMOVA_speech_tokenizer package is not installed",
    )
    params = {
        k: v
        for k, v in {
            "model": os.environ.get("OMNISTORY_MODEL_BACKBONE_EMOVA"),
            "speech_tokenizer": os.environ.get("OMNISTORY_MODEL_BACKBONE_EMOVA_SPEECH_TOKENIZER"),
        }.items()
        if v
    }
    backbone = Emova(seed=0, **params)
    backbone.load()
    out = backbone.run_one(demo_item())
    backbone.unload()
    assert out.text and out.plan["image_prompt"]
    assert isinstance(out.speech, Audio), out.failures
    assert out.speech.samples.size > out.speech.sample_rate // 2  # at least half a second
