"""The plugin module named by the ``omnistory`` entry point: registers ``image=clipart`` and the
config directory holding its yaml.  Imports no torch."""

from __future__ import annotations

from omnistory_core.api import hookimpl


@hookimpl
def register_image_experts(register):
    from omnistory_clipart.expert import ClipArtImage

    register(ClipArtImage)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_clipart.conf")
