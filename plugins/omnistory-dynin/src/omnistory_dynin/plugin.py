"""The plugin module named by the ``omnistory`` entry point (nothing heavy imported here)."""

from __future__ import annotations

from omnistory_core.api import hookimpl


@hookimpl
def register_backbones(register):
    from omnistory_dynin.backbone import DyninOmni

    register(DyninOmni)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_dynin.conf")
