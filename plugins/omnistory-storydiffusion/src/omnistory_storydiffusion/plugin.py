"""The plugin module named by the ``omnistory`` entry point: registers ``image=storydiffusion``
and the config folder (its yaml, the ViStoryBench preset).  Imports no torch."""

from __future__ import annotations

from omnistory_core.api import hookimpl
from omnistory_storydiffusion.expert import IMAGE_EXPERTS


@hookimpl
def register_image_experts(register):
    for expert in IMAGE_EXPERTS:
        register(expert)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_storydiffusion.conf")
