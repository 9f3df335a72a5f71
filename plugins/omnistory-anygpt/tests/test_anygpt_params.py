"""Parameters: validation, defaults (the runner's settings), the cache key, the environment."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omnistory_anygpt.backbone import ANYGPT_REQUIREMENTS, AnyGPT, local_file
from omnistory_anygpt.source import check_source_dir, tree_digest

from omnistory_core.api import ConfigError

CONF = Path(__file__).parents[1] / "src" / "omnistory_anygpt" / "conf" / "backbone" / "anygpt.yaml"


def make(standin, **params) -> AnyGPT:
    return AnyGPT(**{"source_dir": str(standin["source_dir"]), "seed": 0, **params})


def test_defaults_are_the_runner_settings(standin) -> None:
    backbone = make(standin)
    assert backbone.generation_settings("text") == {
        "temperature": 1.0,
        "top_p": 1.0,
        "do_sample": True,
        "max_new_tokens": 100,
        "min_new_tokens": 10,
    }
    assert backbone.generation_settings("image")["max_new_tokens"] == 200
    speech = backbone.generation_settings("speech")
    assert speech["max_new_tokens"] == 1500 and speech["repetition_penalty"] == 1.05
    s = backbone.settings
    assert (s["image_size"], s["image_guidance_scale"], s["image_decode_steps"]) == (224, 10.0, 20)
    assert (s["soundstorm_steps"], s["dtype"], s["parsing"]) == (3, "float16", "official")
    assert s["model"] == "fnlp/AnyGPT-chat"


def test_the_shipped_yaml_lists_every_parameter_with_the_same_defaults(monkeypatch) -> None:
    for name in (
        "OMNISTORY_MODEL_BACKBONE_ANYGPT",
        "OMNISTORY_MODEL_BACKBONE_ANYGPT_SEED",
        "OMNISTORY_MODEL_BACKBONE_ANYGPT_UNCLIP",
        "OMNISTORY_MODEL_BACKBONE_ANYGPT_SPEECH",
        "OMNISTORY_SOURCE_BACKBONE_ANYGPT",
    ):
        monkeypatch.delenv(name, raising=False)
    from omegaconf import OmegaConf

    conf = OmegaConf.to_container(OmegaConf.create(yaml.safe_load(CONF.read_text())), resolve=True)
    assert conf.pop("name") == "anygpt"
    # only the environment variables: unset, they give the declared defaults
    assert conf == {k: AnyGPT.defaults[k] for k in conf}
    env = {"source_dir", "model", "image_tokenizer", "image_decoder", "speech_modules"}
    assert set(conf) == env


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"temprature": 1.0}, "unknown parameter(s) temprature; known:"),
        ({"dtype": "int8"}, "dtype must be one of"),
        ({"top_p": 0}, "top_p must be > 0, got 0"),
        ({"top_p": 1.5}, "top_p must be <= 1, got 1.5"),
        ({"temperature": 0}, "temperature must be > 0, got 0"),
        ({"text_max_new_tokens": 0}, "text_max_new_tokens must be >= 1, got 0"),
        ({"soundstorm_steps": "many"}, "soundstorm_steps must be an integer or null, got 'many'"),
        ({"image_guidance_scale": -1}, "image_guidance_scale must be >= 0, got -1"),
        ({"do_sample": "maybe"}, "do_sample must be true or false"),
        ({"parsing": "json"}, "parsing must be one of ['official', 'lines']"),
        ({"model": ""}, "model must be a hub id or a path"),
        ({"seed": "x"}, "seed must be an integer"),
    ],
)
def test_bad_values_are_one_line_config_errors(standin, params, message) -> None:
    with pytest.raises(ConfigError) as info:
        make(standin, **params)
    text = str(info.value)
    assert text.startswith("backbone=anygpt: ") and message in text and "\n" not in text


def test_source_dir_is_required_and_checked(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match="backbone.source_dir is not set.*git clone https://github.com/OpenMOSS/AnyGPT",
    ):
        AnyGPT()
    with pytest.raises(ConfigError, match="is not a directory"):
        AnyGPT(source_dir=str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="is not a checkout of OpenMOSS/AnyGPT .*seed2/"):
        AnyGPT(source_dir=str(tmp_path))


def test_the_cache_key_holds_the_code_not_the_paths(standin, tmp_path: Path) -> None:
    backbone = make(standin, device="cpu")
    params = backbone.output_params()
    assert "source_dir" not in params and "device" not in params
    assert params["source_tree"] == tree_digest(check_source_dir(str(standin["source_dir"])))
    assert params["seed"] == 0 and params["soundstorm_steps"] == 3
    # the same code elsewhere: same key; changed code: another key
    import shutil

    copy = shutil.copytree(standin["source_dir"], tmp_path / "copy")
    assert AnyGPT(source_dir=str(copy), seed=0, device="cpu").output_params() == params
    voice = copy / "anygpt" / "src" / "infer" / "voice_clone.py"
    voice.write_text(voice.read_text() + "\n# changed\n")
    assert AnyGPT(source_dir=str(copy), seed=0).output_params() != params
    assert make(standin, parsing="lines").output_params() != params


def test_prefetch_lists_the_hub_checkpoints() -> None:
    assert AnyGPT.checkpoints({}) == [
        "fnlp/AnyGPT-chat",
        "AILab-CVC/seed-tokenizer-2",
        "sd2-community/stable-diffusion-2-1-unclip",
        "fnlp/AnyGPT-speech-modules",
        "bert-base-uncased",
    ]


def test_requirements_pin_the_official_stack() -> None:
    pins = dict(r.split("==") for r in ANYGPT_REQUIREMENTS if "==" in r)
    assert pins["torch"] == "2.1.0" and pins["transformers"] == "4.34.1"
    assert pins["diffusers"] == "0.20.2" and pins["speechtokenizer"] == "0.1.2"
    assert "numpy>=1.24,<2" in ANYGPT_REQUIREMENTS
    assert "huggingface_hub>=0.16.4,<0.26" in ANYGPT_REQUIREMENTS
    assert AnyGPT.requirements == ANYGPT_REQUIREMENTS


def test_importing_the_plugin_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, omnistory_anygpt.plugin, omnistory_anygpt.backbone; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_checkpoint_files_resolve_locally_before_the_hub(tmp_path: Path) -> None:
    (tmp_path / "speechtokenizer").mkdir()
    config = tmp_path / "speechtokenizer" / "config.json"
    config.write_text("{}")
    assert local_file(str(tmp_path), "speechtokenizer/config.json") == str(config)
    assert local_file(str(config), "ignored.pt") == str(config)  # the file itself
    assert local_file("org/repo", str(config)) == str(config)  # an absolute file wins
    with pytest.raises(FileNotFoundError):
        local_file(str(tmp_path), "soundstorm/missing.pt")
    with pytest.raises(FileNotFoundError):
        local_file(str(tmp_path / "nowhere"), "seed_quantizer.pt")  # a path, not a hub id
