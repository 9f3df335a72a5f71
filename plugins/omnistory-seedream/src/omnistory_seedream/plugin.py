"""The module named by the ``omnistory`` entry point (imports no SDK)."""

from __future__ import annotations

from omnistory_core.api import hookimpl


@hookimpl
def register_image_experts(register):
    from omnistory_seedream.expert import Seedream

    register(Seedream)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_seedream.conf")
