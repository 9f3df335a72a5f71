"""tts/voxcpm without the model stack: prompts, voices, parameters, registration.

Runs in the main environment (no torch, no voxcpm needed) and in the VoxCPM environment.
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
from omnistory_voxcpm.description import (
    CHARACTERS_BY_GENDER,
    DEFAULT_VOCABULARY,
    GENDER_PHRASES,
    PACE_PHRASES,
    PITCH_PHRASES,
    TONE_PHRASES,
    VoiceLabels,
    controlled_text,
    speaker_character,
    voice_description,
    voice_labels,
)
from omnistory_voxcpm.expert import VoxCPMTTS, clean_text

from omnistory_core.api import EMOTIONS, GENDERS, PITCHES, SPEEDS, ConfigError, Failure

DIST = Path(__file__).resolve().parents[1]
NAMES = [f"Character {i}" for i in range(2000)]


def labels(speaker="Mina", gender="female", emotion="neutral", speed="normal", pitch="normal"):
    return voice_labels(
        {"speaker": speaker, "gender": gender, "emotion": emotion, "speed": speed, "pitch": pitch}
    )


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


def test_prefix_wording_is_pinned():
    # A change here changes every generated utterance: bump VoxCPMTTS.version with it.
    lab = labels("Old Bear", "male", "angry", "fast", "low")
    character = speaker_character(lab)
    assert controlled_text("Go away!", lab) == (
        f"(male voice, {character}, angry and harsh tone, fast pace, low pitch,"
        " clear recording)Go away!"
    )


@pytest.mark.parametrize(
    "gender,emotion,speed,pitch", list(itertools.product(GENDERS, EMOTIONS, SPEEDS, PITCHES))
)
def test_every_label_combination_is_rendered(gender, emotion, speed, pitch):
    lab = labels("Mina", gender, emotion, speed, pitch)
    text = controlled_text("Hello there.", lab)
    description = voice_description(lab)
    assert text == f"({description})Hello there."
    assert text.count("(") == 1 and text.count(")") == 1
    parts = description.split(", ")
    assert parts[0] == GENDER_PHRASES[gender]
    assert parts[1] in CHARACTERS_BY_GENDER[gender]
    assert ", ".join(parts[2:]) == (
        f"{TONE_PHRASES[emotion]}, {PACE_PHRASES[speed]}, {PITCH_PHRASES[pitch]}, clear recording"
    )


def test_label_combinations_give_distinct_prefixes():
    for gender in GENDERS:
        texts = {
            voice_description(labels("Mina", gender, e, s, p))
            for e, s, p in itertools.product(EMOTIONS, SPEEDS, PITCHES)
        }
        assert len(texts) == len(EMOTIONS) * len(SPEEDS) * len(PITCHES)


def test_character_is_stable_per_speaker_and_independent_of_other_labels():
    first = {n: speaker_character(labels(n, "male")) for n in NAMES[:200]}
    assert first == {n: speaker_character(labels(n, "male")) for n in NAMES[:200]}
    assert speaker_character(labels(" Little Bear", "female")) == speaker_character(
        labels("little  bear", "female")
    )
    assert (
        len(
            {
                speaker_character(labels("Mina", "female", e, s, p))
                for e, s, p in itertools.product(EMOTIONS, SPEEDS, PITCHES)
            }
        )
        == 1
    )


def test_character_is_identical_in_another_process_with_another_hash_seed():
    script = (
        "import json; from omnistory_voxcpm.description import voice_description, voice_labels;"
        "print(json.dumps([voice_description(voice_labels({'speaker': f'Character {i}'}))"
        " for i in range(50)]))"
    )
    here = [voice_description(voice_labels({"speaker": f"Character {i}"})) for i in range(50)]
    for seed in ("0", "999"):
        out = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        assert json.loads(out) == here


def test_every_character_of_a_gender_is_used():
    for gender, pool in CHARACTERS_BY_GENDER.items():
        counts = collections.Counter(speaker_character(labels(n, gender)) for n in NAMES)
        assert set(counts) == set(pool)
        assert all(0.28 < c / len(NAMES) < 0.39 for c in counts.values()), counts


@pytest.mark.parametrize("missing", [None, "", "unknown", "non-binary"])
def test_missing_gender_is_not_biased_to_one_gender(missing):
    genders = [voice_description(labels(n, missing)).split(", ")[0] for n in NAMES]
    male = genders.count("male voice")
    assert male + genders.count("female voice") == len(NAMES)
    assert 0.45 < male / len(NAMES) < 0.55, male  # > 4 sd of Binomial(2000, 0.5) each way
    assert genders == [voice_description(labels(n, missing)).split(", ")[0] for n in NAMES]


def test_labels_are_normalised_and_defaulted():
    lab = voice_labels(
        {"speaker": "Mina", "gender": "MALE", "emotion": " Sad", "speed": None, "pitch": ""}
    )
    assert lab == VoiceLabels("Mina", "male", "sad", "normal", "normal")


def test_invalid_label_and_empty_utterance_fail_before_any_model_is_loaded():
    tts = VoxCPMTTS(model="/nonexistent/never/loaded")
    bad = tts.run_one(item(pitch="medium"))
    assert isinstance(bad, Failure) and bad.category == "plan_invalid_label"
    assert "pitch 'medium'" in bad.message
    for text in ("", "  ", "\x00\n"):
        empty = tts.run_one(item(utterance=text))
        assert isinstance(empty, Failure) and empty.category == "empty_output"
    assert tts.model is None


def test_component_prompt_cleans_text_and_uses_configured_vocabulary():
    tts = VoxCPMTTS(
        female_characters=["husky timbre"],
        recording="",
        tone_phrases={**TONE_PHRASES, "happy": "joyful tone"},
    )
    assert tts.prompt(item(utterance=" Look,\n\ta boat! ")) == (
        "(female voice, husky timbre, joyful tone, fast pace, high pitch)Look, a boat!"
    )


@pytest.mark.parametrize(
    "params,message",
    [
        ({"reference_wav_path": "x.wav"}, "unknown parameter"),
        ({"tmperature": 1}, r"unknown parameter\(s\) tmperature; known: .*cfg_value"),
        ({"cfg_value": "strong"}, "cfg_value must be a number, got 'strong'"),
        ({"max_len": None}, "max_len must be an integer, got null"),
        ({"cfg_value": 0}, "cfg_value"),
        ({"inference_timesteps": 0}, "inference_timesteps"),
        ({"max_len": 0}, "max_len"),
        ({"male_characters": "deep"}, "male_characters must be a list, got 'deep'"),
        ({"male_characters": []}, "characters.male must be a non-empty list"),
        ({"tone_phrases": {"happy": "glad"}}, "tone_phrases must have exactly the keys"),
        (
            {"pace_phrases": {**PACE_PHRASES, "fast": "fast (very)"}},
            "pace_phrases.fast must not contain any of",
        ),
        ({"recording": "studio)"}, "recording must be a string without parentheses"),
    ],
)
def test_bad_parameters_are_rejected_by_name(params, message):
    with pytest.raises(ConfigError, match=message) as info:
        VoxCPMTTS(**params)
    assert str(info.value).startswith("tts=voxcpm: ") and "\n" not in str(info.value)


def test_cli_typo_is_one_line_and_exit_2(tmp_path):
    """The user's command line: a misspelt parameter stops the run before any work, with one
    line naming the expert, the key and the valid keys (no traceback)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "tts=voxcpm",
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
    assert "tts=voxcpm: unknown parameter(s) tmperature; known:" in line
    assert "cfg_value" in line.split("known:")[1]
    assert not (tmp_path / "out" / "store").exists()


def test_cache_key_params_exclude_only_runtime_ones():
    a = VoxCPMTTS(device="cuda:0", optimize=True, batch_size=2, seed=5).output_params()
    b = VoxCPMTTS(device="cpu", optimize=False, seed=5).output_params()
    assert a == b and "device" not in a and "optimize" not in a
    assert a["cfg_value"] == 2.0 and a["inference_timesteps"] == 10 and a["seed"] == 5
    assert VoxCPMTTS(cfg_value=3.0).output_params() != VoxCPMTTS().output_params()


def test_shipped_yaml_holds_only_what_differs_from_the_declaration(monkeypatch):
    from omegaconf import OmegaConf

    conf = DIST / "src/omnistory_voxcpm/conf/tts/voxcpm.yaml"
    monkeypatch.delenv("OMNISTORY_MODEL_TTS_VOXCPM", raising=False)
    data = OmegaConf.to_container(OmegaConf.load(conf), resolve=True)
    assert data.pop("name") == "voxcpm"
    declared = {p.name: p.default for p in VoxCPMTTS.parameters}
    assert data == {"model": declared["model"]}  # the yaml adds the environment variable
    assert VoxCPMTTS(**data).vocabulary == DEFAULT_VOCABULARY


def test_requirements_pin_the_stack_and_match_the_model_extra():
    reqs = VoxCPMTTS.requirements
    assert "voxcpm==2.0.3" in reqs and "torch==2.9.1" in reqs
    extra = tomllib.loads((DIST / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["model"]
    assert sorted(extra) == sorted(reqs)


def test_clean_text():
    assert clean_text("\tHi,\x07 there \n") == "Hi, there"


def test_import_and_registration_stay_light():
    script = (
        "import sys, json; import omnistory_voxcpm.plugin, omnistory_voxcpm.expert;"
        "from omnistory_testkit import installed_registry;"
        "reg = installed_registry(); cls = reg.component('tts', 'voxcpm');"
        "heavy = [m for m in ('torch', 'transformers', 'voxcpm') if m in sys.modules];"
        "conf = 'pkg://omnistory_voxcpm.conf' in reg.config_paths;"
        "print(json.dumps([cls.__name__, heavy, conf]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == ["VoxCPMTTS", [], True]
