"""The plugin module named by the ``omnistory`` entry point: registers ``image=qwen_edit`` and
``image=qwen_edit_story`` and the config folder (their yaml, the ViStoryBench presets).  Imports
no torch."""

from __future__ import annotations

from omnistory_core.api import hookimpl
from omnistory_qwen_edit.experts import IMAGE_EXPERTS


@hookimpl
def register_image_experts(register):
    for expert in IMAGE_EXPERTS:
        register(expert)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_qwen_edit.conf")
