"""The paper's presets: the 18 orchestration and 10 semi-orchestration systems compose to the right
components, derive the right paradigm, and run every shared expert with the official runner's
settings (the parity table of the README)."""

from __future__ import annotations

import os
from importlib.resources import files

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf
from omnistory_paper.plugin import ORCHESTRATION, PAPER32, SEMI
from omnistory_testkit import build_component, installed_registry, job_config, resolve_system

#: the official runner's settings of every shared expert that our expert has a parameter for
#: (src/t2i_generator.py and src/t2s_generator.py of the official code; README "Paper parity").
#: Values equal to our component default are checked on the composed config, so a changed default
#: cannot silently move a paper preset away from the official setting.
PARITY: dict[tuple[str, str], dict[str, object]] = {
    ("image", "dev"): {
        "steps": 50,
        "guidance_scale": 3.5,
        "height": 1024,
        "width": 1024,
        "max_sequence_length": 512,
        # torch.Generator("cpu").manual_seed(0) for every image
        "seed_mode": "fixed",
    },
    # the official call passes only the page, the prefixed prompt, guidance and the generator: the
    # rest are FluxKontextPipeline's defaults (28 steps, max_area 1024**2, auto-resize, 512 tokens)
    ("image", "kontext"): {
        "steps": 28,
        "guidance_scale": 2.5,
        "height": 1024,
        "width": 1024,
        "max_sequence_length": 512,
        "auto_resize": True,
        "prompt_prefix": "Keep the art style, characters, and color palette. ",
        "seed_mode": "fixed",
    },
    ("image", "nitro"): {
        "steps": 20,
        "guidance_scale": 4.0,
        "height": 1024,
        "width": 1024,
        "text_encoder": "meta-llama/Llama-3.2-1B",
        "seed_mode": "fixed",
        "generator_device": "cpu",
    },
    # the model at refs/pr/9, the tokenizer from the default branch
    ("tts", "parler"): {
        "revision": "refs/pr/9",
        "tokenizer_revision": "main",
        "dtype": "float32",
        "male_voices": ["Jon", "Gary", "Mike"],
        "female_voices": ["Lea", "Jenna", "Laura"],
        "voice_hash": "official",
        "max_new_tokens": None,
    },
    ("tts", "voxcpm"): {
        "cfg_value": 2.0,
        "inference_timesteps": 10,
        "max_len": 4096,
        "normalize": False,
        "retry_badcase": True,
    },
}

#: the official checkpoints (checked unless an OMNISTORY_MODEL_* variable points elsewhere)
CHECKPOINTS: dict[tuple[str, str], str] = {
    ("image", "dev"): "black-forest-labs/FLUX.1-dev",
    ("image", "kontext"): "black-forest-labs/FLUX.1-Kontext-dev",
    ("image", "nitro"): "amd/Nitro-T-1.2B",
    ("tts", "parler"): "parler-tts/parler-tts-large-v1",
    ("tts", "voxcpm"): "openbmb/VoxCPM2",
}

#: T+I backbones take a TTS expert, T+S backbones an image expert
SEMI_BACKBONES: dict[str, tuple[str, str]] = {
    "mmada": ("tts", "semi-orchestration (T+I)"),
    "emu3": ("tts", "semi-orchestration (T+I)"),
    "qwen25omni": ("image", "semi-orchestration (T+S)"),
    "emova": ("image", "semi-orchestration (T+S)"),
}

#: the presets that name shared experts (any-to-any presets have none)
PRESETS = ORCHESTRATION + SEMI
REGISTRY = installed_registry()


def _compose(overrides: list[str]):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="omnistory_core.conf", version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def _preset_file(system: str) -> dict:
    text = files("omnistory_paper.conf").joinpath(f"system/{system}.yaml").read_text()
    return OmegaConf.to_container(OmegaConf.create(text))


def _experts(system: str) -> list[tuple[str, str]]:
    """(group, expert) pairs a preset names, read from its name."""
    if system in ORCHESTRATION:
        _, image, tts = system.split("_")
        return [("image", image), ("tts", tts)]
    backbone, expert = system.split("_")
    return [(SEMI_BACKBONES[backbone][0], expert)]


def _need_backbone(system: str) -> str:
    backbone = system.split("_")[0]
    if backbone not in REGISTRY.names("backbone"):
        pytest.skip(
            f"backbone={backbone} is not installed: pip install ./plugins/omnistory-{backbone}"
        )
    return backbone


# -- the lists and the suites --------------------------------------------------------------------


def test_there_are_eighteen_named_as_in_the_paper() -> None:
    assert len(ORCHESTRATION) == len(set(ORCHESTRATION)) == 18
    assert {
        "gpt_dev_parler",
        "claude_kontext_voxcpm",
        "glm_dev_voxcpm",
        "internvl_nitro_parler",
        "qwen35_kontext_voxcpm",
    } <= set(ORCHESTRATION)


def test_there_are_ten_semi_orchestration_systems() -> None:
    assert sorted(SEMI) == sorted(
        ["mmada_parler", "mmada_voxcpm", "emu3_parler", "emu3_voxcpm"]
        + [f"{b}_{i}" for b in ("qwen25omni", "emova") for i in ("dev", "kontext", "nitro")]
    )
    assert not set(SEMI) & set(ORCHESTRATION)


def test_every_shipped_preset_is_listed() -> None:
    shipped = {
        p.name.removesuffix(".yaml")
        for p in files("omnistory_paper.conf").joinpath("system").iterdir()
        if p.name.endswith(".yaml")
    }
    assert shipped == set(PAPER32)


def test_suite_orchestration_sweeps_exactly_the_eighteen() -> None:
    cfg = _compose(["suite=orchestration"])
    assert sorted(cfg.hydra.sweeper.params.system.split(",")) == sorted(ORCHESTRATION)


def test_suite_semi_sweeps_exactly_the_ten() -> None:
    cfg = _compose(["suite=semi"])
    swept = cfg.hydra.sweeper.params.system.split(",")
    assert len(swept) == len(set(swept)) == 10
    assert sorted(swept) == sorted(SEMI)


# -- composition and paradigm --------------------------------------------------------------------


@pytest.mark.parametrize("system", ORCHESTRATION)
def test_orchestration_preset_composes(system: str) -> None:
    planner, image, tts = system.split("_")
    cfg = _compose([f"system={system}"])
    assert (cfg.planner.name, cfg.image.name, cfg.tts.name) == (planner, image, tts)
    assert cfg.system_id == system
    plan = resolve_system(job_config(cfg), REGISTRY)
    assert plan.paradigm == "orchestration"
    assert plan.groups == ("planner", "image", "tts")
    assert plan.system_id == system


@pytest.mark.parametrize("system", SEMI)
def test_semi_preset_composes_to_a_backbone_and_one_expert(system: str) -> None:
    backbone = _need_backbone(system)
    group, paradigm = SEMI_BACKBONES[backbone]
    expert = system.split("_")[1]
    cfg = _compose([f"system={system}"])
    assert cfg.backbone.name == backbone
    assert cfg[group].name == expert
    assert cfg.system_id == system
    plan = resolve_system(job_config(cfg), REGISTRY)
    assert plan.paradigm == paradigm
    assert plan.groups == ("backbone", group)
    assert plan.system_id == system


@pytest.mark.parametrize("system", PAPER32)
def test_no_preset_declares_a_paradigm(system: str) -> None:
    # the engine derives it, and refuses a declared one that contradicts the stages
    assert "paradigm" not in _preset_file(system)


def test_cli_override_beats_the_preset() -> None:
    cfg = _compose(["system=gpt_dev_parler", "planner=claude", "image.steps=10"])
    assert cfg.planner.name == "claude" and cfg.system_id == "gpt_dev_parler"
    assert cfg.planner.prompt == "official" and cfg.image.steps == 10


# -- paper parity ----------------------------------------------------------------------------------


@pytest.mark.parametrize("system", PRESETS)
def test_preset_runs_the_experts_with_the_official_settings(system: str) -> None:
    if system in SEMI:
        _need_backbone(system)
    cfg = _compose([f"system={system}"])
    job = job_config(cfg)
    assert job["seed"] == 0  # the official runner seeds every expert with 0
    written = _preset_file(system)
    for group, expert in _experts(system):
        node = job[group]
        assert node["name"] == expert
        defaults = job_config(_compose([f"{group}={expert}"]))[group]
        for key, official in PARITY[(group, expert)].items():
            assert node[key] == official, f"{system}: {group}.{key}"
            if defaults[key] != official:
                # a value that differs from the component default is written in the preset
                assert written[group][key] == official, f"{system} does not set {group}.{key}"
        if f"OMNISTORY_MODEL_{group.upper()}_{expert.upper()}" not in os.environ:
            assert node["model"] == CHECKPOINTS[(group, expert)]
        # and the expert accepts them
        component = build_component(REGISTRY, group, node, seed=job["seed"], allow_oracle=False)
        assert component.name == expert


@pytest.mark.parametrize("system", ORCHESTRATION)
def test_orchestration_presets_use_the_official_planner_prompt(system: str) -> None:
    cfg = _compose([f"system={system}"])
    assert cfg.planner.prompt == "official"
    assert _preset_file(system)["planner"]["prompt"] == "official"
    # the component default stays the project's own prompt
    planner = system.split("_")[0]
    assert _compose([f"planner={planner}"]).planner.prompt == "default"
    planner_component = build_component(
        REGISTRY, "planner", job_config(cfg)["planner"], seed=0, allow_oracle=False
    )
    assert planner_component.params["prompt"] == "official"


def test_parity_table_differs_from_the_defaults_where_the_readme_says() -> None:
    # the settings the presets must write (bold in the README's parity table)
    differing = {
        (group, expert, key)
        for (group, expert), values in PARITY.items()
        for key, official in values.items()
        if job_config(_compose([f"{group}={expert}"]))[group][key] != official
    }
    assert differing == {
        ("image", "dev", "steps"),
        ("image", "dev", "seed_mode"),
        ("image", "kontext", "prompt_prefix"),
        ("image", "kontext", "seed_mode"),
        ("image", "nitro", "seed_mode"),
        ("image", "nitro", "generator_device"),
        ("tts", "parler", "revision"),
        ("tts", "parler", "tokenizer_revision"),
        ("tts", "parler", "voice_hash"),
    }


@pytest.mark.parametrize("system", PRESETS)
def test_preset_experts_carry_the_parity_values_into_their_behaviour(system: str) -> None:
    """The composed values reach the experts' behaviour, not only their configs: the Kontext
    prefix is in the pipeline prompt, every image gets the seed itself, Nitro's generators are
    on the CPU, Parler's tokenizer comes from main and the voice follows the official rule."""
    if system in SEMI:
        _need_backbone(system)
    job = job_config(_compose([f"system={system}"]))
    for group, expert in _experts(system):
        component = build_component(
            REGISTRY, group, job[group], seed=job["seed"], allow_oracle=False
        )
        params = component.output_params()
        if group == "image":
            assert component.seed_mode == "fixed" and params["seed_mode"] == "fixed"
            assert component.item_seed("a fox") == component.item_seed("a cat") == 0
        if expert == "kontext":
            keep = "Keep the art style, characters, and color palette. "
            assert component.pipeline_prompt("a fox") == keep + "a fox"
            assert params["prompt_prefix"] == keep
        if expert == "nitro":
            assert component.generator_device == "cpu" and params["generator_device"] == "cpu"
        if expert == "parler":
            assert component.tokenizer_revision == "main"
            assert params["tokenizer_revision"] == "main" and params["voice_hash"] == "official"
            # SHA-256("Old Bear") mod 3 = 1: Gary (male pool), Jenna (female pool and no gender)
            assert component.describe({"speaker": "Old Bear", "gender": "male"}).startswith("Gary")
            assert component.describe({"speaker": "Old Bear"}).startswith("Jenna")
