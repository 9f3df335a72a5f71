"""The module named by the ``omnistory`` entry point: the suite's configs and their resolver."""

from __future__ import annotations

# registers the ``omnistory_demo_real_gguf`` resolver the presets use
import omnistory_demo_real.conf  # noqa: F401
from omnistory_core.api import hookimpl


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_demo_real.conf")
