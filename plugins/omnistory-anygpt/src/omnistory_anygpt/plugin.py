"""The module named by the ``omnistory`` entry point: registers ``backbone=anygpt`` and the config
directory holding its yaml.  Imports no torch."""

from __future__ import annotations

from omnistory_core.api import hookimpl


@hookimpl
def register_backbones(register):
    from omnistory_anygpt.backbone import AnyGPT

    register(AnyGPT)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_anygpt.conf")
