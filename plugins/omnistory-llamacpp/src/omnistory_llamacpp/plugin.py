"""The module named by the ``omnistory`` entry point; imports neither llama_cpp nor torch."""

from __future__ import annotations

from omnistory_core.api import hookimpl


@hookimpl
def register_planners(register):
    from omnistory_llamacpp.planner import LlamaCppPlanner

    register(LlamaCppPlanner)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_llamacpp.conf")
