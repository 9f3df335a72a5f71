"""The module named by the ``omnistory`` entry point (imports no SDK)."""

from __future__ import annotations

from omnistory_core.api import hookimpl
from omnistory_vllm.planner import GLMPlanner, InternVLPlanner, Qwen35Planner


@hookimpl
def register_planners(register):
    for planner in (GLMPlanner, InternVLPlanner, Qwen35Planner):
        register(planner)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_vllm.conf")
