"""The module named by the ``omnistory`` entry point (imports no SDK)."""

from __future__ import annotations

from omnistory_core.api import hookimpl
from omnistory_openai.planner import GPTPlanner


@hookimpl
def register_planners(register):
    register(GPTPlanner)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_openai.conf")
