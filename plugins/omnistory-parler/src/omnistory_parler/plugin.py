"""The module named by the ``omnistory`` entry point; imports no model library."""

from __future__ import annotations

from omnistory_core.api import hookimpl


@hookimpl
def register_tts_experts(register):
    from omnistory_parler.expert import ParlerTTS

    register(ParlerTTS)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_parler.conf")
