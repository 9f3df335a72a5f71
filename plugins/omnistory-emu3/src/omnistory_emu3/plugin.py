"""The plugin module named by the ``omnistory`` entry point: registers ``backbone=emu3`` and the
config directory holding its yaml.  Imports no torch."""

from __future__ import annotations

from omnistory_core.api import hookimpl
from omnistory_emu3.backbone import BACKBONES


@hookimpl
def register_backbones(register):
    for backbone in BACKBONES:
        register(backbone)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_emu3.conf")
