"""The plugin module named by the ``omnistory`` entry point: two hooks, nothing heavy imported."""

from __future__ import annotations

from omnistory_core.api import hookimpl


@hookimpl
def register_backbones(register):
    from omnistory_hyperclova.backbone import HyperClovaOmni

    register(HyperClovaOmni)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_hyperclova.conf")
