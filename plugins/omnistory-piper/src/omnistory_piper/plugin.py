"""The module named by the ``omnistory`` entry point; imports neither piper nor onnxruntime."""

from __future__ import annotations

from omnistory_core.api import hookimpl


@hookimpl
def register_tts_experts(register):
    from omnistory_piper.expert import PiperTTS

    register(PiperTTS)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_piper.conf")
