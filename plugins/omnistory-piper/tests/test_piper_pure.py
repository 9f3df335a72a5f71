"""The label mapping, the pitch shift and the parameter checks: no piper, no onnx needed."""

from __future__ import annotations

import numpy as np
import pytest
from omnistory_piper.expert import PiperTTS, clean_text
from omnistory_piper.noise import noise_stream
from omnistory_piper.prosody import (
    EMOTION_PROSODY,
    LENGTH_SCALES,
    PITCH_SEMITONES,
    delivery,
    shift_pitch,
)

from omnistory_core.api import ParamError
from omnistory_core.kit.voices import voice_labels

ITEM = {"utterance": "Look!", "speaker": "Mina", "emotion": "neutral", "speed": "normal"}


def settings(**labels):
    return delivery(
        voice_labels({**ITEM, **labels}),
        voice_gender="male",
        other_gender_semitones=7.0,
        other_gender=labels.pop("mode", "shift"),
    )


def test_speed_is_length_scale_and_pitch_is_semitones():
    assert settings(speed="slow", gender="male").length_scale == LENGTH_SCALES["slow"]
    assert settings(speed="fast", gender="male").length_scale == LENGTH_SCALES["fast"]
    for pitch, semitones in PITCH_SEMITONES.items():
        assert settings(pitch=pitch, gender="male").semitones == semitones
    low, high = settings(pitch="low", gender="male"), settings(pitch="high", gender="male")
    assert low.ratio < 1 < high.ratio


def test_emotion_changes_rate_pitch_and_volume():
    sad, happy = settings(emotion="sad", gender="male"), settings(emotion="happy", gender="male")
    assert sad.length_scale == pytest.approx(1.0 / EMOTION_PROSODY["sad"]["rate"])
    assert sad.length_scale > 1.0 > happy.length_scale
    assert sad.volume < 1.0 < happy.volume and sad.semitones < happy.semitones


def test_the_other_gender_is_shifted_spoken_as_is_or_refused():
    shifted = settings(gender="female")
    assert shifted.other_gender and shifted.semitones == PITCH_SEMITONES["normal"] + 7.0
    as_is = delivery(
        voice_labels({**ITEM, "gender": "female"}),
        voice_gender="male",
        other_gender="as_is",
        other_gender_semitones=7.0,
    )
    assert as_is.other_gender and as_is.semitones == PITCH_SEMITONES["normal"]
    refused = delivery(
        voice_labels({**ITEM, "gender": "female"}), voice_gender="male", other_gender="fail"
    )
    assert refused is None
    # a female voice declared as such: a female line is its own gender, a male one is shifted
    own = delivery(
        voice_labels({**ITEM, "gender": "female"}),
        voice_gender="female",
        other_gender_semitones=-7.0,
    )
    assert not own.other_gender and own.semitones == PITCH_SEMITONES["normal"]


def test_shift_pitch_raises_frequency_and_shortens_by_the_ratio():
    rate, hz = 16000, 200.0
    t = np.arange(rate, dtype=np.float32) / rate
    tone = np.sin(2 * np.pi * hz * t).astype(np.float32)
    ratio = 2 ** (4 / 12)
    shifted = shift_pitch(tone, ratio)
    assert shifted.dtype == np.float32
    assert shifted.size == round(rate / ratio)
    peak = np.argmax(np.abs(np.fft.rfft(shifted))) * rate / shifted.size
    assert peak == pytest.approx(hz * ratio, rel=0.01)
    assert shift_pitch(tone, 1.0) is not None and np.array_equal(shift_pitch(tone, 1.0), tone)


def test_noise_streams_are_prefix_stable_and_distinct():
    long, short = noise_stream(3, 0, 0, 5000), noise_stream(3, 0, 0, 700)
    assert np.array_equal(long[:700], short)
    assert not np.array_equal(noise_stream(3, 0, 1, 700), short)
    assert not np.array_equal(noise_stream(3, 1, 0, 700), short)
    assert not np.array_equal(noise_stream(4, 0, 0, 700), short)
    assert abs(float(long.mean())) < 0.1 and 0.9 < float(long.std()) < 1.1


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"length_scales": {"slow": 1.3, "normal": 1.0}}, "length_scales must have exactly"),
        ({"length_scales": {"slow": 1.3, "normal": 0, "fast": 0.7}}, "length_scales.normal"),
        ({"pitch_semitones": {"low": "x", "normal": 0, "high": 2}}, "pitch_semitones.low"),
        ({"emotion_prosody": {**EMOTION_PROSODY, "sad": {"rate": 1}}}, "emotion_prosody.sad"),
        (
            {
                "emotion_prosody": {
                    **EMOTION_PROSODY,
                    "sad": {"semitones": 0, "rate": -1, "volume": 1},
                }
            },
            "emotion_prosody.sad",
        ),
    ],
)
def test_bad_tables_are_one_line_naming_the_key(params, message):
    with pytest.raises(ParamError, match=message) as info:
        PiperTTS(**params)
    assert "tts=piper" in str(info.value) and "\n" not in str(info.value)


def test_unknown_parameter_and_choice_are_refused():
    with pytest.raises(ParamError, match="other_gender"):
        PiperTTS(other_gender="female")
    with pytest.raises(ParamError, match="lenght_scales"):
        PiperTTS(lenght_scales={})


def test_clean_text_keeps_plan_text_out_of_piper_phoneme_syntax():
    assert clean_text("Hi\x00 [[ bad ]]\n there") == "Hi ( bad ) there"
    assert clean_text(" \t ") == ""


def test_cache_key_names_the_voice_file_not_its_path(tmp_path):
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    a.write_bytes(b"voice one")
    b.write_bytes(b"voice two")
    key_a = PiperTTS(model=str(a)).output_params()
    assert key_a["voice_sha256"] != PiperTTS(model=str(b)).output_params()["voice_sha256"]
    assert key_a["config_sha256"] == "missing"  # no a.onnx.json: preflight names it
    with pytest.raises(Exception, match="tts.config: no such file"):
        PiperTTS(model=str(a)).preflight()
