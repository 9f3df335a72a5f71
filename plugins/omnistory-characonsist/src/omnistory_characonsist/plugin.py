"""The plugin module named by the ``omnistory`` entry point: registers ``image=characonsist`` and
the config folder.  Imports no torch."""

from __future__ import annotations

from omnistory_characonsist.expert import IMAGE_EXPERTS
from omnistory_core.api import hookimpl


@hookimpl
def register_image_experts(register):
    for expert in IMAGE_EXPERTS:
        register(expert)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_characonsist.conf")
