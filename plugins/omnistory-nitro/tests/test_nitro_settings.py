"""Configuration and failure categorisation of the Nitro-T expert (no model needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from omnistory_nitro.expert import NitroT, describe_load_error

from omnistory_core.api import ConfigError


def test_plugin_import_stays_light():
    code = (
        "import sys, omnistory_nitro.plugin;"
        "print(sorted(m for m in ('torch', 'diffusers', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_defaults_follow_the_model_card():
    nitro = NitroT(seed=0)
    assert nitro.settings.model == "amd/Nitro-T-1.2B"
    assert nitro.text_encoder == "meta-llama/Llama-3.2-1B"
    assert (nitro.settings.steps, nitro.settings.guidance_scale) == (20, 4.0)
    assert (nitro.settings.height, nitro.settings.width) == (1024, 1024)
    assert nitro.trust_remote_code is True and nitro.batch_size == 1
    assert NitroT.reads == ("image_prompt",)


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"height": 1000}, "height"),  # off the 32-pixel DC-AE grid
        ({"steps": -1}, "steps"),
        ({"text_encoder": ""}, "text_encoder"),
        ({"trust_remote_code": "maybe"}, "trust_remote_code"),
        ({"max_sequence_length": 512}, "max_sequence_length"),  # a FLUX key, not Nitro's
        ({"prompt_prefix": "Keep it. "}, "prompt_prefix"),  # Kontext's, not Nitro's
        ({"seed_mode": "random"}, "seed_mode"),
        ({"generator_device": "cuda"}, "generator_device"),
    ],
)
def test_bad_parameters_are_config_errors_naming_the_parameter(params, named):
    with pytest.raises(ConfigError, match=named) as info:
        NitroT(seed=0, **params)
    assert "image=nitro" in str(info.value)


def test_cache_key_holds_the_text_encoder_but_not_the_device():
    params = NitroT(seed=0, device="cuda:1", batch_size=4).output_params()
    assert "device" not in params and "batch_size" not in params and params["diffusers"]
    params = NitroT(seed=0, text_encoder="/models/llama").output_params()
    assert params["text_encoder"] == "/models/llama"


def test_seed_mode_and_generator_device_defaults():
    nitro = NitroT(seed=0)
    assert (nitro.seed_mode, nitro.generator_device) == ("per_prompt", "pipeline")
    official = NitroT(seed=0, seed_mode="fixed", generator_device="cpu")
    assert (official.seed_mode, official.generator_device) == ("fixed", "cpu")


def test_new_parameters_at_their_defaults_leave_the_cache_key_unchanged(monkeypatch):
    from importlib.resources import files

    from omegaconf import OmegaConf

    monkeypatch.delenv("OMNISTORY_MODEL_IMAGE_NITRO", raising=False)
    text = files("omnistory_nitro.conf").joinpath("image/nitro.yaml").read_text()
    shipped = OmegaConf.to_container(OmegaConf.create(text), resolve=True)
    shipped.pop("name")
    shipped = {**NitroT.defaults, **shipped, "seed": 0}  # the yaml holds only the model
    added = set(NitroT.added_defaults)
    assert added == {"seed_mode", "generator_device"} and added <= set(shipped)
    older = NitroT(**{k: v for k, v in shipped.items() if k not in added}).output_params()
    assert NitroT(**shipped).output_params() == older and not added & set(older)
    official = NitroT(**{**shipped, "seed_mode": "fixed", "generator_device": "cpu"})
    assert official.output_params() == {**older, "seed_mode": "fixed", "generator_device": "cpu"}


def test_gated_checkpoint_errors_say_what_to_do():
    import httpx2
    from huggingface_hub.errors import GatedRepoError

    response = httpx2.Response(401, request=httpx2.Request("GET", "http://127.0.0.1/x"))
    hint = describe_load_error(GatedRepoError("Cannot access gated repo", response=response))
    assert "gated" in hint and "HF_TOKEN" in hint and "Llama-3.2-1B" in hint


def test_offline_and_remote_code_errors_say_what_to_do():
    from huggingface_hub.errors import LocalEntryNotFoundError

    assert "cannot be reached" in describe_load_error(LocalEntryNotFoundError("no file"))
    hint = describe_load_error(ValueError("Pass `trust_remote_code=True` to allow loading"))
    assert "set trust_remote_code=true" in hint
    assert describe_load_error(RuntimeError("boom")) == "RuntimeError: boom"
