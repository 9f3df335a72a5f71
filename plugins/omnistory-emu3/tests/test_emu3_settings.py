"""Parameter validation, the shipped yaml, defaults = the official runner's settings."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import yaml
from emu3_cli import run_cli
from omnistory_emu3.backbone import NATIVE_REQUIREMENTS, Emu3
from omnistory_emu3.settings import DEFAULTS, OFFICIAL_NEGATIVE_PROMPT

from omnistory_core.api import ConfigError


def shipped_yaml() -> dict:
    text = (
        resources.files("omnistory_emu3.conf")
        .joinpath("backbone/emu3.yaml")
        .read_text(encoding="utf-8")
    )
    return yaml.safe_load(text)


def test_defaults_are_the_official_settings():
    s = Emu3().settings
    assert (s.implementation, s.chat_model, s.gen_model, s.vq_model) == (
        "native",
        "BAAI/Emu3-Chat-hf",
        "BAAI/Emu3-Gen-hf",
        None,
    )
    assert (s.chat_temperature, s.chat_top_p, s.chat_repetition_penalty) == (0.2, 0.9, 1.1)
    assert (s.chat_max_new_tokens, s.chat_do_sample, s.chat_top_k) == (512, True, 50)
    assert s.quality_suffix == " masterpiece, film grained, best quality."
    assert (s.guidance_scale, s.gen_top_k, s.gen_do_sample, s.gen_max_new_tokens) == (
        3.0,
        2048,
        True,
        40960,
    )
    assert (s.ratio, s.image_area, s.negative_prompt) == ("1:1", None, OFFICIAL_NEGATIVE_PROMPT)
    assert s.default_voice == {
        "speaker": "Narrator",
        "emotion": "neutral",
        "speed": "normal",
        "pitch": "normal",
        "gender": "female",
    }
    assert Emu3.produces == frozenset({"text", "image"})
    assert Emu3.requirements == NATIVE_REQUIREMENTS
    assert any(r.startswith("transformers>=4.48") for r in Emu3.requirements)


def test_shipped_yaml_holds_only_the_environment_variables():
    conf = shipped_yaml()
    assert conf.pop("name") == "emu3"
    # model ids and source_dir: null (the declared default) unless an environment variable is set
    assert set(conf) == {"chat_model", "gen_model", "vq_model", "source_dir"}
    assert all(str(v).startswith("${oc.env:") and DEFAULTS[k] is None for k, v in conf.items())


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"OMNISTORY_SOURCE_BACKBONE_EMU3": "/new"}, "/new"),
        ({"OMNISTORY_EMU3_SOURCE": "/old"}, "/old"),  # the name before the common scheme
        ({"OMNISTORY_SOURCE_BACKBONE_EMU3": "/new", "OMNISTORY_EMU3_SOURCE": "/old"}, "/new"),
    ],
)
def test_source_dir_reads_the_common_variable_then_the_old_one(monkeypatch, env, expected):
    from omegaconf import OmegaConf

    for name in ("OMNISTORY_SOURCE_BACKBONE_EMU3", "OMNISTORY_EMU3_SOURCE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    conf = OmegaConf.create({"source_dir": shipped_yaml()["source_dir"]})
    assert OmegaConf.to_container(conf, resolve=True)["source_dir"] == expected


def test_remote_code_defaults_and_checkpoints(tmp_path):
    backbone = Emu3(implementation="remote_code", source_dir=str(tmp_path))
    s = backbone.settings
    assert (s.chat_model, s.gen_model, s.vq_model) == (
        "BAAI/Emu3-Chat",
        "BAAI/Emu3-Gen",
        "BAAI/Emu3-VisionTokenizer",
    )
    assert Emu3.checkpoints({"implementation": "remote_code"}) == [
        "BAAI/Emu3-Chat",
        "BAAI/Emu3-Gen",
        "BAAI/Emu3-VisionTokenizer",
    ]
    assert Emu3.checkpoints({"gen_model": "/x/gen"}) == ["BAAI/Emu3-Chat-hf", "/x/gen"]
    # source_dir is runtime only; the resolved checkpoints are part of the cache key
    params = backbone.output_params()
    assert "source_dir" not in params and params["chat_model"] == "BAAI/Emu3-Chat"
    assert Emu3(source_dir=None).output_params()["gen_model"] == "BAAI/Emu3-Gen-hf"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"temperature": 0.2}, "unknown parameter(s) temperature; known: "),
        ({"implementation": "vllm"}, "implementation must be one of ['native', 'remote_code']"),
        ({"implementation": "remote_code"}, "implementation=remote_code needs source_dir"),
        ({"vq_model": "BAAI/Emu3-VisionTokenizer"}, "vq_model is only used by"),
        ({"chat_top_p": 1.5}, "chat_top_p must be <= 1, got 1.5"),
        ({"chat_temperature": 0}, "chat_temperature must be > 0, got 0"),
        ({"chat_max_new_tokens": 0}, "chat_max_new_tokens must be >= 1, got 0"),
        ({"gen_top_k": "many"}, "gen_top_k must be an integer, got 'many'"),
        ({"guidance_scale": -1}, "guidance_scale must be >= 0, got -1"),
        ({"ratio": "square"}, "ratio must look like '1:1'"),
        ({"ratio": "0:1"}, "ratio must look like '1:1'"),
        ({"image_area": 0}, "image_area must be >= 1, got 0"),
        ({"default_voice": {"emotion": "scared"}}, "default_voice: emotion must be one of"),
        ({"default_voice": {"voice": "x"}}, "default_voice: unknown key(s) voice"),
        ({"dtype": "int8"}, "dtype must be one of"),
        ({"chat_do_sample": "maybe"}, "chat_do_sample must be true or false"),
        ({"negative_prompt": 3}, "negative_prompt must be a string"),
        ({"chat_model": ""}, "chat_model must be a non-empty string or null"),
    ],
)
def test_bad_parameters_are_config_errors_naming_the_key(params, message):
    with pytest.raises(ConfigError) as info:
        Emu3(**params)
    text = str(info.value)
    assert text.startswith("backbone=emu3: ") and message in text
    assert "\n" not in text


def test_partial_voice_override_keeps_the_other_defaults():
    voice = Emu3(default_voice={"gender": "male", "speaker": "Pip"}).settings.default_voice
    assert voice == {
        "speaker": "Pip",
        "emotion": "neutral",
        "speed": "normal",
        "pitch": "normal",
        "gender": "male",
    }


def test_cli_refuses_bad_parameters_and_incoherent_systems(tmp_path: Path):
    bad = run_cli(
        "backbone=emu3",
        "tts=espeak",
        "backbone.ratio=wide",
        f"output_root={tmp_path / 'out'}",
        cwd=tmp_path,
    )
    assert bad.returncode == 2
    assert "backbone=emu3: ratio must look like '1:1'" in bad.stderr
    assert "Traceback" not in bad.stderr
    # Emu3 draws its own images: an image expert is refused before any model call
    incoherent = run_cli(
        "backbone=emu3", "image=copy", "tts=espeak", f"output_root={tmp_path / 'out'}", cwd=tmp_path
    )
    assert incoherent.returncode == 2
    assert "Traceback" not in incoherent.stderr
    assert not (tmp_path / "out" / "store").exists()
