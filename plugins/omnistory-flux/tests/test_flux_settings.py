"""Configuration, seeds and sizing of the FLUX experts (no model needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from omnistory_flux.experts import FluxDev, FluxKontext, kontext_condition_size

from omnistory_core.api import ComponentError, ConfigError
from omnistory_core.kit.diffusion import (
    call_with_fallback,
    generator_seed,
    item_seed,
    key_without_defaults,
)


def test_plugin_import_stays_light():
    code = (
        "import sys, omnistory_flux.plugin;"
        "print(sorted(m for m in ('torch', 'diffusers', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_defaults_follow_the_reference_settings():
    dev, kontext = FluxDev(seed=0), FluxKontext(seed=0)
    assert dev.settings.model == "black-forest-labs/FLUX.1-dev"
    assert (dev.settings.steps, dev.settings.guidance_scale) == (28, 3.5)
    assert (dev.settings.height, dev.settings.width, dev.max_sequence_length) == (1024, 1024, 512)
    assert kontext.settings.model == "black-forest-labs/FLUX.1-Kontext-dev"
    assert (kontext.settings.steps, kontext.settings.guidance_scale) == (28, 2.5)
    assert kontext.auto_resize is True
    assert dev.settings.dtype == kontext.settings.dtype == "auto"


def test_reads_only_kontext_sees_the_page():
    assert FluxDev.reads == ("image_prompt",)
    assert FluxKontext.reads == ("image_prompt", "current_image")


def test_yaml_values_override_defaults_and_null_means_default():
    dev = FluxDev(
        seed=3,
        steps=4,
        guidance_scale=0,
        height=512,
        width=768,
        max_sequence_length=None,
        dtype="bf16",
        batch_size=2,
    )
    assert (dev.settings.steps, dev.settings.guidance_scale) == (4, 0.0)
    assert (dev.settings.height, dev.settings.width) == (512, 768)
    assert dev.max_sequence_length == 512 and dev.settings.dtype == "bfloat16"
    assert dev.batch_size == 2 and dev.settings.seed == 3


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"steps": 0}, "steps"),
        ({"steps": "many"}, "steps"),
        ({"height": 1000}, "height"),
        ({"width": -16}, "width"),
        ({"guidance_scale": "strong"}, "guidance_scale"),
        ({"max_sequence_length": 1024}, "max_sequence_length"),
        ({"dtype": "int8"}, "dtype"),
        ({"model": ""}, "model"),
        ({"stepz": 3}, "stepz"),
    ],
)
def test_bad_parameters_are_config_errors_naming_the_parameter(params, named):
    with pytest.raises(ConfigError, match=named) as info:
        FluxDev(seed=0, **params)
    assert "image=dev" in str(info.value)


def test_kontext_rejects_non_boolean_auto_resize():
    with pytest.raises(ConfigError, match="auto_resize"):
        FluxKontext(seed=0, auto_resize="sometimes")


def test_cache_key_params_include_library_version_but_not_device():
    dev = FluxDev(seed=0, device="cpu", batch_size=8)
    params = dev.output_params()
    assert "device" not in params and "batch_size" not in params
    assert params["seed"] == 0 and params["diffusers"]


def test_seed_mode_and_prompt_prefix_defaults_and_validation():
    dev, kontext = FluxDev(seed=0), FluxKontext(seed=0)
    assert dev.seed_mode == kontext.seed_mode == "per_prompt"
    assert dev.prompt_prefix == kontext.prompt_prefix == ""
    assert FluxDev(seed=0, seed_mode=None).seed_mode == "per_prompt"  # null = the default
    assert (
        FluxKontext(seed=0, seed_mode="fixed", prompt_prefix="Keep it. ").prompt_prefix
        == "Keep it. "
    )
    with pytest.raises(ConfigError, match=r"image=dev: seed_mode must be one of \['per_prompt'"):
        FluxDev(seed=0, seed_mode="per_image")
    with pytest.raises(ConfigError, match="image=kontext: prompt_prefix must be a string"):
        FluxKontext(seed=0, prompt_prefix=3)
    # the prefix is Kontext's: a kontext preset's prefix must not slip silently into dev
    with pytest.raises(ConfigError, match="image=dev: unknown parameter.*prompt_prefix"):
        FluxDev(seed=0, prompt_prefix="Keep it. ")


def _shipped(name: str) -> dict:
    from importlib.resources import files

    from omegaconf import OmegaConf

    text = files("omnistory_flux.conf").joinpath(f"image/{name}.yaml").read_text()
    node = OmegaConf.to_container(OmegaConf.create(text), resolve=True)
    node.pop("name")
    return node


@pytest.mark.parametrize("cls", [FluxDev, FluxKontext])
def test_new_parameters_at_their_defaults_leave_the_cache_key_unchanged(cls, monkeypatch):
    """seed_mode (and Kontext's prompt_prefix) at their declared defaults: the key is then exactly
    the one of the parameters that existed before them."""
    monkeypatch.delenv(f"OMNISTORY_MODEL_IMAGE_{cls.name.upper()}", raising=False)
    shipped = {**cls.defaults, **_shipped(cls.name), "seed": 0}
    assert shipped["seed_mode"] == "per_prompt"
    added = set(cls.added_defaults)
    assert added == ({"seed_mode", "prompt_prefix"} if cls is FluxKontext else {"seed_mode"})
    assert added <= set(shipped)
    older = cls(**{k: v for k, v in shipped.items() if k not in added}).output_params()
    assert cls(**shipped).output_params() == older
    assert not added & set(older)
    fixed = cls(**{**shipped, "seed_mode": "fixed"}).output_params()
    assert fixed == {**older, "seed_mode": "fixed"}


def test_kontext_prompt_prefix_is_in_the_cache_key_when_set():
    plain = FluxKontext(seed=0).output_params()
    prefixed = FluxKontext(seed=0, prompt_prefix="Keep it. ").output_params()
    assert prefixed == {**plain, "prompt_prefix": "Keep it. "}


def test_key_without_defaults():
    params = {"a": 1, "seed_mode": "per_prompt", "seed": 0}
    defaults = {"seed_mode": "per_prompt", "extra": ""}
    assert key_without_defaults(params, {"seed_mode": "per_prompt", "extra": ""}, defaults) == {
        "a": 1,
        "seed": 0,
    }
    assert key_without_defaults(params, {"seed_mode": "fixed", "extra": "x"}, defaults) == {
        "a": 1,
        "extra": "x",
        "seed": 0,
        "seed_mode": "fixed",
    }


def test_generator_seed_modes():
    assert generator_seed("per_prompt", 0, "a fox") == item_seed(0, "a fox")
    assert generator_seed("per_prompt", 0, "a fox") != generator_seed("per_prompt", 0, "a cat")
    assert generator_seed("fixed", 0, "a fox") == generator_seed("fixed", 0, "a cat") == 0
    assert generator_seed("fixed", 7, "a fox") == 7
    with pytest.raises(ValueError, match="seed_mode"):
        generator_seed("sometimes", 0, "a fox")


def test_item_seed_depends_on_seed_and_content_only():
    assert item_seed(0, "a fox") == item_seed(0, "a fox")
    assert item_seed(0, "a fox") != item_seed(1, "a fox")
    assert item_seed(0, "a fox") != item_seed(0, "a fox ")
    assert 0 <= item_seed(7, "\ud800 lone surrogate") < 2**63
    # pinned: a change here silently changes every cached image for the same cache key
    assert item_seed(0, "a fox") == 1004555853864259259


@pytest.mark.parametrize(
    ("size", "auto_resize", "expected"),
    [
        ((64, 64), False, (64, 64)),
        ((100, 70), False, (96, 64)),
        ((64, 64), True, (1024, 1024)),
        ((1600, 900), True, (1392, 752)),
        ((300, 900), True, (672, 1568)),
    ],
)
def test_kontext_condition_size(size, auto_resize, expected):
    from diffusers.pipelines.flux.pipeline_flux_kontext import PREFERRED_KONTEXT_RESOLUTIONS

    got = kontext_condition_size(
        *size, auto_resize=auto_resize, multiple=16, preferred=list(PREFERRED_KONTEXT_RESOLUTIONS)
    )
    assert got == expected


def test_kontext_condition_size_rejects_tiny_pages():
    with pytest.raises(ComponentError, match="8x40"):
        kontext_condition_size(8, 40, auto_resize=True, multiple=16, preferred=[(1024, 1024)])


def test_call_with_fallback_isolates_the_failing_item():
    calls = []

    def call(batch):
        calls.append(list(batch))
        if "bad" in batch:
            raise RuntimeError("cannot encode 'bad'")
        return [f"image:{x}" for x in batch]

    out = call_with_fallback(call, ["a", "bad", "c"])
    assert out[0] == "image:a" and out[2] == "image:c"
    assert out[1].category == "model_error" and "cannot encode 'bad'" in out[1].message
    assert calls == [["a", "bad", "c"], ["a"], ["bad"], ["c"]]


def test_call_with_fallback_keeps_timeout_category():
    def call(batch):
        raise TimeoutError("too slow")

    (failure,) = call_with_fallback(call, ["a"])
    assert failure.category == "timeout"
