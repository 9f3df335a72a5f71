"""Parameter validation, defaults and what goes into the cache key."""

from __future__ import annotations

import pytest
import yaml
from omnistory_hyperclova.backbone import DEFAULTS, RUNTIME, HyperClovaOmni
from omnistory_testkit import installed_registry, prefetch_checkpoints

from omnistory_core.api import ConfigError


def test_registered_any_to_any() -> None:
    cls = installed_registry().component("backbone", "hyperclova")
    assert cls is HyperClovaOmni
    assert cls.produces == frozenset({"text", "image", "speech"})
    assert set(cls.requirements) >= {"openai>=3.57,<4", "httpx2", "soundfile>=0.12", "pillow>=10"}


def test_yaml_holds_only_what_differs_from_the_declaration() -> None:
    from importlib.resources import files

    text = (files("omnistory_hyperclova.conf") / "backbone" / "hyperclova.yaml").read_text()
    conf = yaml.safe_load(text)
    assert conf == {"name": "hyperclova", "model": DEFAULTS_MODEL_EXPR}
    assert DEFAULTS["model"] == "track_b_model"


def test_defaults_follow_the_benchmark_runner() -> None:
    p = HyperClovaOmni().params
    assert p["model"] == "track_b_model"
    assert (p["text_max_tokens"], p["image_max_tokens"], p["speech_max_tokens"]) == (
        2048,
        7000,
        2048,
    )
    assert p["reasoning"] is True and p["thinking_token_budget"] == 1024
    assert (p["image_attempts"], p["image_retry_delay_s"]) == (10, 1.5)
    assert p["temperature"] is None and p["top_p"] is None and p["sampling_seed"] is None


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"modle": "x"}, "unknown parameter(s) modle; known: api_key_env, base_url,"),
        ({"max_concurrency": 0}, "max_concurrency must be >= 1, got 0"),
        ({"image_attempts": True}, "image_attempts must be an integer, got True"),
        ({"image_transport": "ftp"}, "image_transport must be one of ['data_url', 'http']"),
        ({"image_transport": "http"}, "image_transport=http needs backbone.image_http_root"),
        (
            {"image_transport": "http", "image_http_root": "/d", "image_base_url": "ftp://h"},
            "image_base_url must be an http(s) URL",
        ),
        ({"tool_choice": "force"}, "tool_choice must be one of ['auto', 'required', 'named']"),
        ({"base_url": "localhost:8000"}, "base_url must be null or an http(s) URL"),
        ({"timeout_s": 0}, "timeout_s must be > 0, got 0"),
        ({"thinking_token_budget": -1}, "thinking_token_budget must be >= 0, got -1"),
        ({"reasoning": "yes"}, "reasoning must be true or false, got 'yes'"),
    ],
)
def test_bad_parameters_name_backbone_and_key(params: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        HyperClovaOmni(**params)
    message = str(info.value)
    assert message.startswith("backbone=hyperclova: ") and "\n" not in message
    assert needle in message


def test_runtime_params_stay_out_of_the_cache_key() -> None:
    a = HyperClovaOmni(
        base_url="http://a:1/b/v1",
        max_concurrency=2,
        image_attempts=3,
        image_retry_delay_s=0.1,
        timeout_s=5,
        api_key_env="X",
    )
    b = HyperClovaOmni()
    assert a.output_params() == b.output_params()
    assert not set(RUNTIME) & set(b.output_params())
    assert "prompts_sha256" in b.output_params()
    assert HyperClovaOmni(text_max_tokens=100).output_params() != b.output_params()
    assert HyperClovaOmni(reasoning=False).output_params() != b.output_params()


def test_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMNISTORY_HYPERCLOVA_BASE_URL", raising=False)
    assert HyperClovaOmni().base_url == "http://localhost:8000/b/v1"
    monkeypatch.setenv("OMNISTORY_HYPERCLOVA_BASE_URL", "http://omni:9000/b/v1")
    assert HyperClovaOmni().base_url == "http://omni:9000/b/v1"
    assert HyperClovaOmni(base_url="http://x:1/b/v1").base_url == "http://x:1/b/v1"


def test_model_env_override_through_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from omegaconf import OmegaConf

    monkeypatch.setenv("OMNISTORY_MODEL_BACKBONE_HYPERCLOVA", "my_track_b")
    conf = OmegaConf.create({"model": DEFAULTS_MODEL_EXPR})
    assert conf.model == "my_track_b"


DEFAULTS_MODEL_EXPR = "${oc.env:OMNISTORY_MODEL_BACKBONE_HYPERCLOVA,track_b_model}"


def test_plugin_import_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, omnistory_hyperclova.plugin, omnistory_hyperclova.backbone; "
        "print(sorted(m for m in ('openai', 'httpx2', 'soundfile', 'torch') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_prefetch_needs_nothing() -> None:
    assert prefetch_checkpoints("backbone", HyperClovaOmni, {"model": "track_b_model"}) == []
