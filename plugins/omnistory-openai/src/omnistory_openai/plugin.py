"""The module named by the ``omnistory`` entry point (imports no SDK): the ``gpt`` planner and
the ``gpt_image`` image expert."""

from __future__ import annotations

from omnistory_core.api import hookimpl
from omnistory_openai.planner import GPTPlanner


@hookimpl
def register_planners(register):
    register(GPTPlanner)


@hookimpl
def register_image_experts(register):
    from omnistory_openai.image import GPTImage

    register(GPTImage)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_openai.conf")
