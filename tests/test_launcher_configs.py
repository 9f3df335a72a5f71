"""The sweep's process composes each job's config once (``keep_sweep_configs``): Hydra's sweeper
checks every batch by composing its jobs' configs, and the launcher composes them again."""

from __future__ import annotations

import pickle

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import create_config_search_path
from hydra.types import RunMode
from omegaconf import OmegaConf, open_dict

from omnistory_core.compose_once import composing_loader, keep_sweep_configs


def _loader_and_master() -> tuple[ConfigLoaderImpl, object]:
    loader = ConfigLoaderImpl(
        config_search_path=create_config_search_path("pkg://omnistory_core.conf")
    )
    master = loader.load_configuration(
        config_name="config", overrides=["planner=template,copy"], run_mode=RunMode.MULTIRUN
    )
    return loader, master


def test_each_job_config_is_composed_once_and_every_caller_gets_its_own_copy() -> None:
    loader, master = _loader_and_master()
    composed: list[list[str]] = []
    compose = loader.load_configuration

    def counting(*args, **kwargs):
        composed.append(list(kwargs.get("overrides", [])))
        return compose(*args, **kwargs)

    loader.load_configuration = counting  # type: ignore[method-assign]
    expected = ConfigLoaderImpl.load_sweep_config(loader, master, ["planner=copy"])
    composed.clear()

    keep_sweep_configs(loader)
    keep_sweep_configs(loader)  # a second launcher setup keeps the first cache
    first = loader.load_sweep_config(master, ["planner=copy"])
    with open_dict(first):
        first.hydra.job.id = 7  # what run_job does to its copy
    second = loader.load_sweep_config(master, ["planner=copy"])
    other = loader.load_sweep_config(master, ["planner=template"])

    assert len(composed) == 2  # planner=copy once, planner=template once
    assert second is not first and OmegaConf.is_missing(second.hydra.job, "id")
    assert OmegaConf.to_yaml(second) == OmegaConf.to_yaml(expected)
    assert second.planner.name == "copy" and other.planner.name == "template"


def test_a_pickled_context_carries_hydras_own_method() -> None:
    loader, master = _loader_and_master()
    keep_sweep_configs(loader)
    loader.load_sweep_config(master, ["planner=copy"])
    with composing_loader(loader):
        assert "load_sweep_config" not in vars(loader)
        restored = pickle.loads(pickle.dumps(loader))
    assert "load_sweep_config" in vars(loader)  # kept again afterwards
    assert "load_sweep_config" not in vars(restored)
    fresh = restored.load_sweep_config(master, ["planner=copy"])
    assert fresh.planner.name == "copy"
