"""The plugin module named by the ``omnistory`` entry point: registers ``backbone=qwen25omni`` and
the config directory holding its yaml.  Imports no torch."""

from __future__ import annotations

from omnistory_core.api import hookimpl
from omnistory_qwen25omni.backbone import BACKBONES


@hookimpl
def register_backbones(register):
    for backbone in BACKBONES:
        register(backbone)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_qwen25omni.conf")
