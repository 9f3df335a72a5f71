"""The paper's 18 orchestration presets compose to the right planner / image / tts."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omnistory_paper.plugin import ORCHESTRATION

from omnistory_core.engine.system import job_config, resolve_system
from omnistory_core.plugins import load_plugins


def _compose(overrides: list[str]):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="omnistory_core.conf", version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def test_there_are_eighteen_named_as_in_the_paper() -> None:
    assert len(ORCHESTRATION) == len(set(ORCHESTRATION)) == 18
    assert {
        "gpt_dev_parler",
        "claude_kontext_voxcpm",
        "glm_dev_voxcpm",
        "internvl_nitro_parler",
        "qwen35_kontext_voxcpm",
    } <= set(ORCHESTRATION)


@pytest.mark.parametrize("system", ORCHESTRATION)
def test_preset_composes(system: str) -> None:
    planner, image, tts = system.split("_")
    cfg = _compose([f"system={system}"])
    assert (cfg.planner.name, cfg.image.name, cfg.tts.name) == (planner, image, tts)
    assert cfg.system_id == system
    assert resolve_system(job_config(cfg), load_plugins()).paradigm == "orchestration"


def test_suite_orchestration_sweeps_exactly_the_eighteen() -> None:
    cfg = _compose(["suite=orchestration"])
    assert sorted(cfg.hydra.sweeper.params.system.split(",")) == sorted(ORCHESTRATION)


def test_cli_override_beats_the_preset() -> None:
    cfg = _compose(["system=gpt_dev_parler", "planner=claude"])
    assert cfg.planner.name == "claude" and cfg.system_id == "gpt_dev_parler"
