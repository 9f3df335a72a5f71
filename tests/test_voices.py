"""The shared voice-choice helpers: stable across processes, balanced when the gender is missing."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import pytest

from omnistory_core.kit.voices import resolve_gender, speaker_key, stable_choice, voice_for

NAMES = [f"Character {i}" for i in range(2000)]
VOICES = {"female": ("f1", "f2", "f3", "f4"), "male": ("m1", "m2", "m3")}


def test_stable_choice_is_a_fixed_function_of_the_key():
    # Golden values: a change here would re-voice every cached character of every user.
    assert stable_choice("Anna", range(1000)) == 847
    assert stable_choice("gender:little bear", ("female", "male")) == "female"
    assert stable_choice("Anna", ["only"]) == "only"


def test_stable_choice_is_identical_in_other_processes_and_hash_seeds():
    keys = ["Anna", "Little Bear", "狐狸", ""]
    script = (
        "import json, sys; from omnistory_core.kit.voices import stable_choice; "
        "print(json.dumps([stable_choice(k, range(97)) for k in json.loads(sys.argv[1])]))"
    )
    here = [stable_choice(k, range(97)) for k in keys]
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script, json.dumps(keys)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert json.loads(out) == here


def test_stable_choice_spreads_keys_uniformly():
    counts = collections.Counter(stable_choice(name, "abcd") for name in NAMES)
    assert set(counts) == set("abcd")
    for option in "abcd":
        assert 0.21 < counts[option] / len(NAMES) < 0.29, counts


def test_stable_choice_rejects_empty_options():
    with pytest.raises(ValueError, match="no options"):
        stable_choice("Anna", [])


@pytest.mark.parametrize(
    "label,expected",
    [
        ("female", "female"),
        ("male", "male"),
        ("Female", "female"),
        (" MALE ", "male"),
    ],
)
def test_resolve_gender_keeps_known_labels(label, expected):
    assert all(resolve_gender(label, name) == expected for name in NAMES[:50])


@pytest.mark.parametrize("missing", [None, "", "unknown", "nonbinary", "n/a"])
def test_missing_gender_is_balanced_and_deterministic(missing):
    genders = [resolve_gender(missing, name) for name in NAMES]
    share = genders.count("female") / len(genders)
    assert set(genders) == {"female", "male"}
    assert 0.46 < share < 0.54, share
    assert genders == [resolve_gender(missing, name) for name in NAMES]
    # every kind of missing label gives a speaker the same gender
    assert genders == [resolve_gender(None, name) for name in NAMES]


def test_speaker_key_ignores_case_and_spacing():
    assert speaker_key("  Little   Bear ") == speaker_key("little bear") == "little bear"


def test_voice_for_is_stable_per_speaker_and_respects_gender():
    for name in NAMES[:200]:
        voice = voice_for(name, "female", VOICES)
        assert voice in VOICES["female"]
        assert voice_for(name.upper() + "  ", "Female", VOICES) == voice
        assert voice_for(name, "male", VOICES) in VOICES["male"]


def test_voice_for_uses_every_voice_and_is_independent_of_the_resolved_gender():
    # Among speakers whose gender came from their name, the variant is still uniform: the two
    # hashes are salted differently, so a gender never pins a variant.
    resolved_female = [n for n in NAMES if resolve_gender(None, n) == "female"]
    counts = collections.Counter(voice_for(n, None, VOICES) for n in resolved_female)
    assert set(counts) == set(VOICES["female"])
    assert min(counts.values()) / max(counts.values()) > 0.8, counts


def test_voice_for_missing_gender_list_is_a_clear_error():
    with pytest.raises(KeyError, match="no voices for gender 'male'"):
        voice_for("Anna", "male", {"female": ("f1",)})
