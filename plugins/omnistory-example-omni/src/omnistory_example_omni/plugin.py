"""The plugin module named by the ``omnistory`` entry point: two hooks, nothing heavy imported."""

from __future__ import annotations

from omnistory_core.api import hookimpl


@hookimpl
def register_backbones(register):
    from omnistory_example_omni.backbone import ExampleOmni, ExampleTextImage, ExampleTextSpeech

    register(ExampleOmni)
    register(ExampleTextImage)
    register(ExampleTextSpeech)


@hookimpl
def register_config_paths(register):
    # conf/backbone/<name>.yaml (parameters and defaults) and conf/system/<preset>.yaml
    register("pkg://omnistory_example_omni.conf")
