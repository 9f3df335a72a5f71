"""The module named by the ``omnistory`` entry point (imports no SDK)."""

from __future__ import annotations

from omnistory_anthropic.planner import ClaudePlanner
from omnistory_core.api import hookimpl


@hookimpl
def register_planners(register):
    register(ClaudePlanner)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_anthropic.conf")
