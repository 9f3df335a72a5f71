"""The built-in offline components, registered through the same hooks as any third-party plugin."""

from __future__ import annotations

from omnistory_core.hookspecs import hookimpl


@hookimpl
def register_planners(register):
    from omnistory_core.builtin import planners

    for cls in planners.PLANNERS:
        register(cls)


@hookimpl
def register_image_experts(register):
    from omnistory_core.builtin import images

    for cls in images.IMAGE_EXPERTS:
        register(cls)


@hookimpl
def register_tts_experts(register):
    from omnistory_core.builtin import espeak_tts, noop_tts

    register(espeak_tts.EspeakTTS)
    register(noop_tts.NoopTTS)


@hookimpl
def register_backbones(register):
    from omnistory_core.builtin import noop_backbone

    register(noop_backbone.NoopBackbone)


@hookimpl
def register_metrics(register):
    from omnistory_core.evaluation.metrics import METRICS

    for cls in METRICS:
        register(cls)


@hookimpl
def register_datasets(register):
    from omnistory_core import data

    register("demo", data.load_dataset)
    register("omnistorybench", data.load_dataset)
