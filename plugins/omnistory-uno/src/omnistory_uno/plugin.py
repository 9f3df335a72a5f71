"""The plugin module named by the ``omnistory`` entry point: registers ``image=uno`` and
``image=uno_refs`` and the config folder.  Imports no torch."""

from __future__ import annotations

from omnistory_core.api import hookimpl
from omnistory_uno.experts import IMAGE_EXPERTS


@hookimpl
def register_image_experts(register):
    for expert in IMAGE_EXPERTS:
        register(expert)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_uno.conf")
