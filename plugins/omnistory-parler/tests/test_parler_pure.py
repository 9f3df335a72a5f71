"""tts/parler without the model stack: descriptions, voices, parameters, registration.

Runs in the main environment (no torch, no parler_tts needed) and in the Parler environment.
"""

from __future__ import annotations

import collections
import hashlib
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
    official_voice,
    parler_description,
    parler_voice,
    voice_labels,
)
from omnistory_parler.expert import ParlerTTS, clean_text

from omnistory_core.api import EMOTIONS, GENDERS, PITCHES, SPEEDS, ConfigError, Failure

DIST = Path(__file__).resolve().parents[1]
NAMES = [f"Character {i}" for i in range(2000)]


def labels(speaker="Mina", gender="female", emotion="neutral", speed="normal", pitch="normal"):
    return voice_labels(
        {"speaker": speaker, "gender": gender, "emotion": emotion, "speed": speed, "pitch": pitch}
    )


def test_description_wording_is_pinned():
    # A change here changes every generated utterance: bump ParlerTTS.version with it.
    text = parler_description(labels("Old Bear", "male", "angry", "fast", "low"))
    voice = parler_voice(labels("Old Bear", "male"))
    assert text == (
        f"{voice} speaks quite fast with a low pitch, in a very expressive and animated voice"
        " that sounds angry and forceful. The recording is very clear audio with almost no"
        " background noise."
    )


@pytest.mark.parametrize(
    "gender,emotion,speed,pitch", list(itertools.product(GENDERS, EMOTIONS, SPEEDS, PITCHES))
)
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
    assert parler_voice(labels("Little  Bear ", "male")) == parler_voice(
        labels("little bear", "male")
    )
    # The voice does not depend on the utterance's other labels.
    voices = {
        parler_voice(labels("Mina", "female", e, s, p))
        for e, s, p in itertools.product(EMOTIONS, SPEEDS, PITCHES)
    }
    assert len(voices) == 1


def test_voice_is_identical_in_another_process_with_another_hash_seed():
    script = (
        "import json; from omnistory_parler.description import parler_voice, voice_labels;"
        "print(json.dumps([parler_voice(voice_labels({'speaker': f'Character {i}'}))"
        " for i in range(50)]))"
    )
    here = [parler_voice(voice_labels({"speaker": f"Character {i}"})) for i in range(50)]
    for seed in ("0", "4242"):
        out = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
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
    lab = voice_labels(
        {"speaker": "Mina", "gender": " Female ", "emotion": "HAPPY ", "speed": "", "pitch": None}
    )
    assert lab == VoiceLabels("Mina", "female", "happy", "normal", "normal")
    assert voice_labels({}).emotion == "neutral"


@pytest.mark.parametrize(
    "field,value",
    [
        ("emotion", "furious"),
        ("speed", "very fast"),
        ("pitch", "medium"),
    ],
)
def test_invalid_label_names_the_field(field, value):
    with pytest.raises(ValueError, match=f"{field} '{value}' is not one of"):
        labels(**{field: value})


# -- the component, without loading a model ---------------------------------------------------
def item(**over):
    base = {
        "utterance": "Look, a boat!",
        "speaker": "Mina",
        "emotion": "happy",
        "speed": "fast",
        "pitch": "high",
        "gender": "female",
    }
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
    tts = ParlerTTS(
        male_voices=["Rick"],
        female_voices=["Karen"],
        recording="",
        speed_phrases={"slow": "very slowly", "normal": "normally", "fast": "very fast"},
    )
    assert tts.describe(item(gender="female", speed="slow")) == (
        "Karen speaks very slowly with a high pitch, in a very expressive and animated voice"
        " that sounds happy and cheerful."
    )
    assert tts.describe(item(gender="male")).startswith("Rick speaks very fast")


@pytest.mark.parametrize(
    "params,message",
    [
        ({"voice": "Jon"}, "unknown parameter"),
        ({"tmperature": 1}, r"unknown parameter\(s\) tmperature; known: .*temperature"),
        ({"temperature": "hot"}, "temperature must be a number, got 'hot'"),
        ({"voice_hash": "sha1"}, r"voice_hash must be one of \['ours', 'official'\]"),
        ({"dtype": "float64"}, r"dtype must be one of \[.*\], got 'float64'"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"temperature": 0}, "temperature"),
        ({"male_voices": []}, "voices.male must be a non-empty list"),
        ({"emotion_tone": {"happy": "glad"}}, r"emotion_tone must have exactly the keys"),
        ({"pitch_phrases": {"low": "low", "normal": "", "high": "high"}}, "pitch_phrases.normal"),
    ],
)
def test_bad_parameters_are_rejected_by_name(params, message):
    with pytest.raises(ConfigError, match=message) as info:
        ParlerTTS(**params)
    assert str(info.value).startswith("tts=parler: ") and "\n" not in str(info.value)


def test_cli_typo_is_one_line_and_exit_2(tmp_path):
    """The user's command line: a misspelt parameter stops the run before any work, with one
    line naming the expert, the key and the valid keys (no traceback)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "tts=parler",
            "image=noop",
            "++tts.tmperature=1",
            "dataset.limit=1",
            f"output_root={tmp_path / 'out'}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    (line,) = [x for x in out.stderr.splitlines() if "tmperature" in x]
    assert "tts=parler: unknown parameter(s) tmperature; known:" in line
    assert "temperature" in line.split("known:")[1] and "voice_hash" in line
    assert not (tmp_path / "out" / "store").exists()


# -- the official runner's voice choice (voice_hash=official) -------------------------------------
def official_index(name: str) -> int:
    """By hand: 16 = 1 (mod 3), so a hexadecimal number is congruent mod 3 to the sum of its
    digits; the official index is the SHA-256 hex digest of the name, as a number, mod 3."""
    return sum(int(d, 16) for d in hashlib.sha256(name.encode("utf-8")).hexdigest()) % 3


# hand-computed: SHA-256 hex digest digit sums mod 3 (checked against official_index below)
OFFICIAL_CHOICES = [
    # speaker, gender, voice
    ("Mina", "female", "Laura"),  # index 2
    ("Mina", "male", "Mike"),
    ("Old Bear", "male", "Gary"),  # index 1
    ("Lily", "female", "Lea"),  # index 0
    ("Rabbit", "male", "Jon"),  # index 0
    ("Owl", "male", "Gary"),  # index 1: the name as given...
    ("owl", "male", "Mike"),  # ...so case matters (index 2)
    ("Owl", None, "Jenna"),  # no gender: the female pool
    ("Owl", "", "Jenna"),
    ("Owl", "non-binary", "Jenna"),  # anything but male: the female pool
    ("", "male", "Gary"),  # empty name: hashed as "default" (index 1)
    (None, "female", "Jenna"),
]


@pytest.mark.parametrize("speaker,gender,voice", OFFICIAL_CHOICES)
def test_official_voice_reproduces_the_official_choice(speaker, gender, voice):
    pool = VOICES_BY_GENDER["male" if gender == "male" else "female"]
    assert pool[official_index(speaker or "default")] == voice
    assert official_voice(speaker, gender) == voice


def test_official_voice_hash_in_the_component():
    official = ParlerTTS(voice_hash="official")
    for speaker, gender, voice in OFFICIAL_CHOICES:
        text = official.describe(item(speaker=speaker, gender=gender))
        assert text.startswith(f"{voice} speaks quite fast with a high pitch,"), text
    # ours (the default) normalises the name and resolves a missing gender from it
    ours = ParlerTTS()
    assert ours.describe(item(speaker="Owl", gender="male")) == ours.describe(
        item(speaker=" owl", gender="male")
    )
    counts = collections.Counter(
        official.describe(item(speaker=n, gender=None)).split()[0] for n in NAMES[:300]
    )
    assert set(counts) == set(VOICES_BY_GENDER["female"])


def test_tokenizer_revision_defaults_to_the_model_revision():
    assert ParlerTTS().tokenizer_revision is None
    assert ParlerTTS(revision="refs/pr/9").tokenizer_revision == "refs/pr/9"
    assert ParlerTTS(revision="refs/pr/9", tokenizer_revision="main").tokenizer_revision == "main"
    assert ParlerTTS(tokenizer_revision="abc").tokenizer_revision == "abc"


def test_new_parameters_at_their_defaults_leave_the_cache_key_unchanged():
    # the key parameters at the defaults, as written before tokenizer_revision and voice_hash
    older = {
        "do_sample": True,
        "dtype": "float32",
        "emotion_delivery": EMOTION_DELIVERY,
        "emotion_tone": EMOTION_TONE,
        "female_voices": ["Lea", "Jenna", "Laura"],
        "male_voices": ["Jon", "Gary", "Mike"],
        "max_new_tokens": None,
        "model": "parler-tts/parler-tts-large-v1",
        "pitch_phrases": {
            "high": "a high pitch",
            "low": "a low pitch",
            "normal": "a moderate pitch",
        },
        "recording": "The recording is very clear audio with almost no background noise.",
        "revision": None,
        "seed": 0,
        "speed_phrases": {
            "fast": "quite fast",
            "normal": "at a moderate speed",
            "slow": "quite slowly",
        },
        "temperature": 1.0,
    }
    assert ParlerTTS().output_params() == older
    assert ParlerTTS(tokenizer_revision=None, voice_hash="ours").output_params() == older
    pinned = ParlerTTS(revision="refs/pr/9").output_params()
    # a tokenizer revision equal to the model's is the default behaviour
    assert ParlerTTS(revision="refs/pr/9", tokenizer_revision="refs/pr/9").output_params() == pinned
    paper = ParlerTTS(revision="refs/pr/9", tokenizer_revision="main", voice_hash="official")
    assert paper.output_params() == {
        **pinned,
        "tokenizer_revision": "main",
        "voice_hash": "official",
    }


def test_cache_key_params_exclude_only_runtime_ones():
    tts = ParlerTTS(device="cuda:1", batch_size=4, seed=3)
    out = tts.output_params()
    assert "device" not in out and "batch_size" not in out
    assert out["seed"] == 3 and out["model"] == "parler-tts/parler-tts-large-v1"
    other = ParlerTTS(device="cpu", seed=3).output_params()
    assert out == other
    assert (
        ParlerTTS(emotion_tone={**EMOTION_TONE, "sad": "gloomy"}).output_params()
        != ParlerTTS().output_params()
    )


def test_shipped_yaml_holds_only_what_differs_from_the_declaration(monkeypatch):
    from omegaconf import OmegaConf

    conf = DIST / "src/omnistory_parler/conf/tts/parler.yaml"
    monkeypatch.delenv("OMNISTORY_MODEL_TTS_PARLER", raising=False)
    data = OmegaConf.to_container(OmegaConf.load(conf), resolve=True)
    assert data.pop("name") == "parler"
    declared = {p.name: p.default for p in ParlerTTS.parameters}
    assert data == {"model": declared["model"]}  # the yaml adds the environment variable
    assert (declared["tokenizer_revision"], declared["voice_hash"]) == (None, "ours")
    assert ParlerTTS(**data).vocabulary == DEFAULT_VOCABULARY


def test_requirements_pin_the_stack_and_match_the_model_extra():
    reqs = ParlerTTS.requirements
    assert "parler-tts==0.2.3" in reqs and "transformers==4.46.1" in reqs
    extra = tomllib.loads((DIST / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["model"]
    assert sorted(extra) == sorted(reqs)


def test_clean_text():
    assert clean_text(" Look,\x00 a\tboat!\n ") == "Look, a boat!"


def test_import_and_registration_stay_light():
    script = (
        "import sys, json; import omnistory_parler.plugin, omnistory_parler.expert;"
        "from omnistory_testkit import installed_registry;"
        "reg = installed_registry(); cls = reg.component('tts', 'parler');"
        "heavy = [m for m in ('torch', 'transformers', 'parler_tts') if m in sys.modules];"
        "conf = 'pkg://omnistory_parler.conf' in reg.config_paths;"
        "print(json.dumps([cls.__name__, heavy, conf]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == ["ParlerTTS", [], True]
