"""tts/parler without the model stack: descriptions, voices, parameters, registration.

Runs in the main environment (no torch, no parler_tts needed) and in the Parler environment.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from omnistory_parler.description import (
    DEFAULT_VOCABULARY,
    EMOTION_DELIVERY,
    EMOTION_TONE,
    KNOWN_VOICES,
    PITCH_PHRASES,
    RECORDING,
    SPEED_PHRASES,
    VOICES_BY_GENDER,
    VoiceLabels,
    parler_description,
    parler_voice,
    voice_labels,
)
from omnistory_parler.expert import ParlerTTS, clean_text

from omnistory_core.contract import EMOTIONS, GENDERS, PITCHES, SPEEDS, Failure

DIST = Path(__file__).resolve().parents[1]
NAMES = [f"Character {i}" for i in range(2000)]


def labels(speaker="Mina", gender="female", emotion="neutral", speed="normal", pitch="normal"):
    return voice_labels({"speaker": speaker, "gender": gender, "emotion": emotion,
                         "speed": speed, "pitch": pitch})


def test_description_wording_is_pinned():
    # A change here changes every generated utterance: bump ParlerTTS.version with it.
    text = parler_description(labels("Old Bear", "male", "angry", "fast", "low"))
    voice = parler_voice(labels("Old Bear", "male"))
    assert text == (
        f"{voice} speaks quite fast with a low pitch, in a very expressive and animated voice"
        " that sounds angry and forceful. The recording is very clear audio with almost no"
        " background noise."
    )


@pytest.mark.parametrize("gender,emotion,speed,pitch",
                         list(itertools.product(GENDERS, EMOTIONS, SPEEDS, PITCHES)))
def test_every_label_combination_is_rendered(gender, emotion, speed, pitch):
    lab = labels("Mina", gender, emotion, speed, pitch)
    text = parler_description(lab)
    voice = parler_voice(lab)
    assert voice in VOICES_BY_GENDER[gender]
    assert text.startswith(f"{voice} speaks {SPEED_PHRASES[speed]} with {PITCH_PHRASES[pitch]},")
    assert f"in a {EMOTION_DELIVERY[emotion]} voice that sounds {EMOTION_TONE[emotion]}." in text
    assert text.endswith(RECORDING)


def test_label_combinations_give_distinct_descriptions():
    for gender in GENDERS:
        texts = {
            parler_description(labels("Mina", gender, e, s, p))
            for e, s, p in itertools.product(EMOTIONS, SPEEDS, PITCHES)
        }
        assert len(texts) == len(EMOTIONS) * len(SPEEDS) * len(PITCHES)


def test_default_voices_are_trained_parler_speakers():
    assert set(VOICES_BY_GENDER) == set(GENDERS)
    for pool in VOICES_BY_GENDER.values():
        assert len(pool) == 3 and set(pool) <= set(KNOWN_VOICES)
    assert not set(VOICES_BY_GENDER["male"]) & set(VOICES_BY_GENDER["female"])


def test_speed_and_pitch_phrases_ignore_emotion():
    # Emotion must not leak into the separately scored speed and pitch labels.
    for emotion in EMOTIONS:
        text = parler_description(labels(emotion=emotion, speed="slow", pitch="high"))
        assert "speaks quite slowly with a high pitch," in text


def test_voice_is_stable_per_speaker_and_name_normalised():
    first = {name: parler_voice(labels(name, "male")) for name in NAMES[:200]}
    assert first == {name: parler_voice(labels(name, "male")) for name in NAMES[:200]}
    assert parler_voice(labels("Little  Bear ", "male")) == \
        parler_voice(labels("little bear", "male"))
    # The voice does not depend on the utterance's other labels.
    voices = {parler_voice(labels("Mina", "female", e, s, p))
              for e, s, p in itertools.product(EMOTIONS, SPEEDS, PITCHES)}
    assert len(voices) == 1


def test_voice_is_identical_in_another_process_with_another_hash_seed():
    script = (
        "import json; from omnistory_parler.description import parler_voice, voice_labels;"
        "print(json.dumps([parler_voice(voice_labels({'speaker': f'Character {i}'}))"
        " for i in range(50)]))"
    )
    here = [parler_voice(voice_labels({"speaker": f"Character {i}"})) for i in range(50)]
    for seed in ("0", "4242"):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             check=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        assert json.loads(out) == here


def test_every_voice_of_a_pool_is_used():
    for gender, pool in VOICES_BY_GENDER.items():
        counts = collections.Counter(parler_voice(labels(n, gender)) for n in NAMES)
        assert set(counts) == set(pool)
        assert all(0.28 < c / len(NAMES) < 0.39 for c in counts.values()), counts


@pytest.mark.parametrize("missing", [None, "", "  ", "unknown", "non-binary"])
def test_missing_gender_is_not_biased_to_one_gender(missing):
    voices = [parler_voice(labels(name, missing)) for name in NAMES]
    male = sum(v in VOICES_BY_GENDER["male"] for v in voices)
    female = sum(v in VOICES_BY_GENDER["female"] for v in voices)
    assert male + female == len(NAMES)
    # Binomial(2000, 0.5) has sd ~22: 0.45..0.55 is more than 4 sd either way.
    assert 0.45 < male / len(NAMES) < 0.55, (male, female)
    # ... and a speaker without gender keeps one voice on every page.
    assert voices == [parler_voice(labels(name, missing)) for name in NAMES]


def test_labels_are_normalised_and_defaulted():
    lab = voice_labels({"speaker": "Mina", "gender": " Female ", "emotion": "HAPPY ",
                        "speed": "", "pitch": None})
    assert lab == VoiceLabels("Mina", "female", "happy", "normal", "normal")
    assert voice_labels({}).emotion == "neutral"


@pytest.mark.parametrize("field,value", [
    ("emotion", "furious"), ("speed", "very fast"), ("pitch", "medium"),
])
def test_invalid_label_names_the_field(field, value):
    with pytest.raises(ValueError, match=f"{field} '{value}' is not one of"):
        labels(**{field: value})


# -- the component, without loading a model ---------------------------------------------------
def item(**over):
    base = {"utterance": "Look, a boat!", "speaker": "Mina", "emotion": "happy",
            "speed": "fast", "pitch": "high", "gender": "female"}
    return {**base, **over}


def test_invalid_label_and_empty_utterance_fail_before_any_model_is_loaded():
    tts = ParlerTTS(model="/nonexistent/never/loaded")
    bad = tts.run_one(item(emotion="furious"))
    assert isinstance(bad, Failure) and bad.category == "plan_invalid_label"
    assert "emotion 'furious'" in bad.message
    for text in ("", "   ", "\n\t"):
        empty = tts.run_one(item(utterance=text))
        assert isinstance(empty, Failure) and empty.category == "empty_output"
    assert tts.model is None


def test_component_description_uses_configured_vocabulary():
    tts = ParlerTTS(male_voices=["Rick"], female_voices=["Karen"], recording="",
                    speed_phrases={"slow": "very slowly", "normal": "normally",
                                   "fast": "very fast"})
    assert tts.describe(item(gender="female", speed="slow")) == (
        "Karen speaks very slowly with a high pitch, in a very expressive and animated voice"
        " that sounds happy and cheerful."
    )
    assert tts.describe(item(gender="male")).startswith("Rick speaks very fast")


@pytest.mark.parametrize("params,message", [
    ({"voice": "Jon"}, "unknown parameter"),
    ({"dtype": "float64"}, "dtype 'float64'"),
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"temperature": 0}, "temperature"),
    ({"male_voices": []}, "voices.male must be a non-empty list"),
    ({"emotion_tone": {"happy": "glad"}}, r"emotion_tone must have exactly the keys"),
    ({"pitch_phrases": {"low": "low", "normal": "", "high": "high"}}, "pitch_phrases.normal"),
])
def test_bad_parameters_are_rejected_by_name(params, message):
    with pytest.raises(ValueError, match=message):
        ParlerTTS(**params)


def test_cache_key_params_exclude_only_runtime_ones():
    tts = ParlerTTS(device="cuda:1", batch_size=4, seed=3)
    out = tts.output_params()
    assert "device" not in out and "batch_size" not in out
    assert out["seed"] == 3 and out["model"] == "parler-tts/parler-tts-large-v1"
    other = ParlerTTS(device="cpu", seed=3).output_params()
    assert out == other
    assert ParlerTTS(emotion_tone={**EMOTION_TONE, "sad": "gloomy"}).output_params() != \
        ParlerTTS().output_params()


def test_shipped_yaml_matches_the_defaults(monkeypatch):
    from omegaconf import OmegaConf

    conf = DIST / "src/omnistory_parler/conf/tts/parler.yaml"
    monkeypatch.delenv("OMNISTORY_MODEL_TTS_PARLER", raising=False)
    data = OmegaConf.to_container(OmegaConf.load(conf), resolve=True)
    assert data.pop("name") == "parler"
    assert data == {k: v for k, v in ParlerTTS.DEFAULTS.items() if k != "seed"}
    assert ParlerTTS(**data).vocabulary == DEFAULT_VOCABULARY


def test_requirements_pin_the_stack_and_match_the_model_extra():
    reqs = ParlerTTS.requirements
    assert "parler-tts==0.2.3" in reqs and "transformers==4.46.1" in reqs
    extra = tomllib.loads((DIST / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["model"]
    assert sorted(extra) == sorted(reqs)


def test_clean_text():
    assert clean_text(" Look,\x00 a\tboat!\n ") == "Look, a boat!"


def test_import_and_registration_stay_light():
    script = (
        "import sys, json; import omnistory_parler.plugin, omnistory_parler.expert;"
        "from omnistory_core.plugins import load_plugins;"
        "reg = load_plugins(); cls = reg.component('tts', 'parler');"
        "heavy = [m for m in ('torch', 'transformers', 'parler_tts') if m in sys.modules];"
        "conf = 'pkg://omnistory_parler.conf' in reg.config_paths;"
        "print(json.dumps([cls.__name__, heavy, conf]))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == ["ParlerTTS", [], True]
