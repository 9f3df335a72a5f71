"""The module named by the ``omnistory`` entry point (imports no SDK)."""

from __future__ import annotations

from omnistory_core.api import hookimpl


@hookimpl
def register_image_experts(register):
    from omnistory_gemini_image.expert import NanoBanana

    register(NanoBanana)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_gemini_image.conf")
