"""The plugin hooks of omnistory-vistorybench (entry point ``vistorybench``).

Registers the task, the image experts (``copy_paste``, the Copy-Paste Baseline; ``first_ref`` and
``sequential``, wrappers of an edit model), the five metrics (``cids``, ``csd``, ``prompt_align``,
``aesthetic``, ``diversity``: the task's ``EVALUATORS``) and the demo's stand-in judge
(``prompt_align_standin``), the ViStory dataset loader (under
``vistory`` and ``vistory_fixture``, the bundled offline copy) and the config folder holding
``task/vistorybench``, ``dataset/vistory*``, ``image/*``, ``system/*`` (``copy_paste``,
``planner_flux_dev``, ``kontext_first_ref``, ``story_kontext``, and the hosted image models of the
published rows: ``nanobanana_pro``, ``nanobanana_flash``, ``seedream4``, ``gpt4o``, ``gemini``),
``suite/vistorybench_open`` (the open-weight methods' presets, which their own plugins ship) and
``metric/<name>``.  Each hook
imports only what it registers; nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from omnistory_core.api import hookimpl

#: the dataset configs whose root may be left unset: the bundled fixture stands in for it
FIXTURE_DATASET = "vistory_fixture"


def load_vistory(spec: Mapping[str, Any]) -> list[Any]:
    """The ``vistory`` loader: :func:`omnistory_vistorybench.dataset.load_records`."""
    from omnistory_vistorybench.dataset import load_records

    return load_records(spec)


def load_vistory_fixture(spec: Mapping[str, Any]) -> list[Any]:
    """The ``vistory_fixture`` loader: the bundled fixture unless ``root`` names another copy."""
    from omnistory_vistorybench.dataset import fixture_root, load_records

    return load_records({**spec, "root": spec.get("root") or str(fixture_root())})


@hookimpl
def register_tasks(register: Callable[[Any], None]) -> None:
    from omnistory_vistorybench.task import VISTORYBENCH

    register(VISTORYBENCH)


@hookimpl
def register_image_experts(register: Callable[[type], None]) -> None:
    from omnistory_vistorybench.experts import IMAGE_EXPERTS

    for cls in IMAGE_EXPERTS:
        register(cls)


@hookimpl
def register_metrics(register: Callable[[type], None]) -> None:
    from omnistory_vistorybench.demo import PromptAlignStandIn
    from omnistory_vistorybench.metrics import metric_classes

    for cls in metric_classes():
        register(cls)
    # the offline demo's local stand-in for the prompt-alignment judge (suite=vistory_demo)
    register(PromptAlignStandIn)


@hookimpl
def register_datasets(register: Callable[[str, Callable[..., Any]], None]) -> None:
    register("vistory", load_vistory)
    register(FIXTURE_DATASET, load_vistory_fixture)


@hookimpl
def register_config_paths(register: Callable[[str], None]) -> None:
    register("pkg://omnistory_vistorybench.conf")
