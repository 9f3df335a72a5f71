"""The plugin module named by the ``omnistory`` entry point: registers ``backbone=omnidiffusion``
and the config directory holding its yaml.  Imports no torch."""

from __future__ import annotations

from omnistory_core.api import hookimpl


@hookimpl
def register_backbones(register):
    from omnistory_omnidiffusion.backbone import BACKBONES

    for backbone in BACKBONES:
        register(backbone)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_omnidiffusion.conf")
