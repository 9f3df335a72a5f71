"""tts/piper through its own load() on a tiny ONNX voice the test builds (piper's input and output
names, a RandomNormalLike op, a matching .onnx.json); needs piper-tts and onnx, skipped without."""

from __future__ import annotations

import numpy as np
import pytest
from omnistory_piper.prosody import LENGTH_SCALES
from piper_test_voice import SAMPLE_RATE, SAMPLES_PER_ID, build_tiny_voice, need_piper

from omnistory_core.api import Audio, ComponentError, Failure

need_piper()

import omnistory_piper.expert as expert_module  # noqa: E402
from omnistory_piper.expert import PiperTTS  # noqa: E402

ITEM = {
    "utterance": "Look, a boat!",
    "speaker": "Old Bear",
    "emotion": "neutral",
    "speed": "normal",
    "pitch": "normal",
    "gender": "male",
}


def make(voice, **params) -> PiperTTS:
    return PiperTTS(model=str(voice), **params)


@pytest.fixture(scope="module")
def tts(tiny_voice):
    component = make(tiny_voice)
    component.load()
    yield component
    component.unload()


@pytest.fixture(scope="module")
def reference(tts) -> Audio:
    return tts.run_one(ITEM)


def test_loads_through_its_own_path_and_speaks(tts, reference):
    assert tts.noise_inputs == ("omnistory_noise_0",)  # the random op became a seeded input
    assert isinstance(reference, Audio) and reference.sample_rate == SAMPLE_RATE
    samples = reference.samples
    assert samples.dtype == np.float32 and samples.ndim == 1
    # piper's phonemizer ran: ^ _ (phoneme _)* $ ids, 48 samples each at length_scale 1 (the
    # normal pitch label's +4 semitones stretch and shrink it back)
    ids = tts.voice.phonemes_to_ids(tts.voice.phonemize("Look, a boat!")[0])
    assert abs(samples.size - len(ids) * SAMPLES_PER_ID) <= 2
    assert np.isfinite(samples).all() and 0 < np.abs(samples).max() <= 1.0


def test_same_seed_same_audio_in_any_order_in_a_fresh_instance(tts, reference, tiny_voice):
    other = {**ITEM, "utterance": "Where did the little bear go?"}
    first = tts.run_batch([other, ITEM])
    assert np.array_equal(first[1].samples, reference.samples)
    fresh = make(tiny_voice)  # loads lazily on its first call
    assert np.array_equal(fresh.run_one(ITEM).samples, reference.samples)
    assert np.array_equal(fresh.run_one(other).samples, first[0].samples)


def test_the_seed_decides_the_noise(tts, reference, tiny_voice):
    seeded = make(tiny_voice, seed=1)
    assert not np.array_equal(seeded.run_one(ITEM).samples, reference.samples)
    silent = make(tiny_voice, noise_scale=0.0, seed=1)
    assert np.array_equal(
        silent.run_one(ITEM).samples, make(tiny_voice, noise_scale=0.0).run_one(ITEM).samples
    )


def test_a_short_first_noise_buffer_gives_the_same_audio(tts, reference, monkeypatch):
    monkeypatch.setattr(expert_module, "_NOISE_PER_ID", 1)  # forces several doublings
    assert np.array_equal(tts.run_one(ITEM).samples, reference.samples)


def test_speed_label_sets_the_length(tts, reference):
    slow = tts.run_one({**ITEM, "speed": "slow"}).samples.size
    fast = tts.run_one({**ITEM, "speed": "fast"}).samples.size
    assert fast < reference.samples.size < slow
    assert slow / reference.samples.size == pytest.approx(LENGTH_SCALES["slow"], rel=0.05)


def test_pitch_label_shifts_the_frequency_not_the_length(tts, reference):
    def centroid(samples):
        spectrum = np.abs(np.fft.rfft(samples))
        return float((spectrum * np.arange(spectrum.size)).sum() / spectrum.sum()) / samples.size

    low = tts.run_one({**ITEM, "pitch": "low"}).samples
    high = tts.run_one({**ITEM, "pitch": "high"}).samples
    assert (
        abs(low.size - reference.samples.size) <= 4 and abs(high.size - reference.samples.size) <= 4
    )
    assert centroid(low) < centroid(reference.samples) < centroid(high)


def test_female_lines_follow_other_gender(tiny_voice, tts, reference):
    female = {**ITEM, "gender": "female"}
    shifted = tts.run_one(female).samples
    assert not np.array_equal(shifted, reference.samples)
    assert np.array_equal(
        make(tiny_voice, other_gender="as_is").run_one(female).samples, reference.samples
    )
    refused = make(tiny_voice, other_gender="fail").run_one(female)
    assert isinstance(refused, Failure) and refused.category == "voice_unavailable"
    assert "male" in refused.message and "female" in refused.message


def test_bad_items_fail_alone_in_a_batch(tts, reference):
    results = tts.run_batch([{**ITEM, "speed": "warp"}, ITEM, {**ITEM, "utterance": " \n"}])
    assert isinstance(results[0], Failure) and results[0].category == "plan_invalid_label"
    assert isinstance(results[1], Audio) and np.array_equal(results[1].samples, reference.samples)
    assert isinstance(results[2], Failure) and results[2].category == "empty_output"


def test_a_file_that_is_no_voice_stops_load_with_its_name(tmp_path, tiny_voice):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx model")
    (tmp_path / "bad.onnx.json").write_text(tiny_voice.with_suffix(".onnx.json").read_text())
    with pytest.raises(ComponentError, match="bad.onnx: not an ONNX model"):
        make(bad).load()
    (tmp_path / "v.onnx.json").write_text("{}")
    (tmp_path / "v.onnx").write_bytes(tiny_voice.read_bytes())
    with pytest.raises(ComponentError, match="not a Piper voice config"):
        make(tmp_path / "v.onnx").load()


def test_a_random_op_that_cannot_be_seeded_is_refused(tmp_path):
    voice = build_tiny_voice(tmp_path, random_ops="RandomUniformLike")
    with pytest.raises(ComponentError, match="RandomUniformLike"):
        make(voice).load()
