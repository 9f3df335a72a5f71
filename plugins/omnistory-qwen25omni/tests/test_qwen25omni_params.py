"""Parameters: official defaults, validation messages, the cache key, the shipped yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omnistory_qwen25omni.backbone import DEFAULTS, RUNTIME_PARAMS, Qwen25OmniBackbone
from omnistory_testkit import check_produces, paradigm_of

from omnistory_core.api import ConfigError

YAML = (
    Path(__file__).parents[1]
    / "src"
    / "omnistory_qwen25omni"
    / "conf"
    / "backbone"
    / "qwen25omni.yaml"
)


def test_defaults_are_the_official_settings():
    backbone = Qwen25OmniBackbone(seed=0)
    s = backbone.settings
    assert (s.model, s.backend, s.dtype, s.attn_implementation) == (
        "Qwen/Qwen2.5-Omni-7B",
        "transformers",
        "auto",
        "flash_attention_2",
    )
    assert s.speaker is None  # the model's own default voice, as the official runner
    assert s.thinker_max_new_tokens is None and s.talker_max_new_tokens is None
    assert check_produces(Qwen25OmniBackbone) == frozenset({"text", "speech"})
    assert paradigm_of(Qwen25OmniBackbone.produces) == "semi-orchestration (T+S)"


def test_requirements_pin_the_official_transformers():
    reqs = Qwen25OmniBackbone.requirements
    assert "transformers==4.57.6" in reqs and "torch==2.10.0" in reqs
    assert any(r.startswith("soundfile") for r in reqs) and any(
        r.startswith("accelerate") for r in reqs
    )


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"temprature": 0.4}, "unknown parameter(s) temprature; known: "),
        ({"backend": "vllm"}, "backend must be one of ['transformers', 'vllm_omni']"),
        ({"dtype": "int8"}, "dtype must be auto | bfloat16 | float16 | float32"),
        ({"attn_implementation": "flash"}, "attn_implementation must be"),
        (
            {"speaker": "Ethan", "backend": "vllm_omni"},
            "speaker must be null with backend=vllm_omni",
        ),
        ({"speaker": ""}, "speaker must be null or a non-empty string"),
        ({"launch": True}, "launch must be false unless backend=vllm_omni"),
        ({"backend": "vllm_omni", "base_url": None}, "base_url must be the server's URL"),
        ({"thinker_max_new_tokens": 0}, "thinker_max_new_tokens must be >= 1, got 0"),
        ({"talker_max_new_tokens": "lots"}, "talker_max_new_tokens must be an integer or null"),
        ({"timeout_s": -1}, "timeout_s must be > 0, got -1"),
        ({"launch_port": 70000}, "launch_port must be <= 65535, got 70000"),
        ({"launch_executable": []}, "launch_executable must be"),
        ({"model": ""}, "model must be a hub id"),
        ({"max_concurrency": 0}, "max_concurrency must be >= 1, got 0"),
    ],
)
def test_bad_parameters_name_the_component_and_key(params, needle):
    with pytest.raises(ConfigError) as info:
        Qwen25OmniBackbone(seed=0, **params)
    message = str(info.value)
    assert message.startswith("backbone=qwen25omni: ") and needle in message
    assert "\n" not in message


def test_unknown_key_lists_the_valid_ones():
    with pytest.raises(ConfigError) as info:
        Qwen25OmniBackbone(seed=0, base_urll="x")
    assert "base_url" in str(info.value) and "talker_max_new_tokens" in str(info.value)


def test_vllm_omni_with_launch_needs_no_base_url():
    backbone = Qwen25OmniBackbone(seed=0, backend="vllm_omni", launch=True, base_url=None)
    assert backbone.settings.launch and backbone.settings.base_url is None


def test_runtime_parameters_stay_out_of_the_cache_key():
    a = Qwen25OmniBackbone(seed=0, device="cpu", timeout_s=5, base_url="http://a/v1")
    b = Qwen25OmniBackbone(seed=0, device="cuda:1", timeout_s=50, max_concurrency=9, batch_size=8)
    assert a.output_params() == b.output_params()
    assert set(a.output_params()) == set(DEFAULTS) - set(RUNTIME_PARAMS) | {"seed"}
    assert Qwen25OmniBackbone(seed=0, backend="vllm_omni").output_params() != a.output_params()
    assert Qwen25OmniBackbone(seed=1).output_params() != a.output_params()


def test_shipped_yaml_holds_only_what_differs_from_the_declaration(monkeypatch):
    monkeypatch.delenv("OMNISTORY_MODEL_BACKBONE_QWEN25OMNI", raising=False)
    from omegaconf import OmegaConf

    raw = yaml.safe_load(YAML.read_text())
    assert raw["name"] == "qwen25omni"
    assert set(raw) == {"name", "model"}  # the model's environment variable
    resolved = OmegaConf.to_container(OmegaConf.load(YAML), resolve=True)
    assert resolved["model"] == DEFAULTS["model"]
    monkeypatch.setenv("OMNISTORY_MODEL_BACKBONE_QWEN25OMNI", "/models/omni")
    assert OmegaConf.to_container(OmegaConf.load(YAML), resolve=True)["model"] == "/models/omni"
    Qwen25OmniBackbone(seed=0, **{k: v for k, v in resolved.items() if k != "name"})
