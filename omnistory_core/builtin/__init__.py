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
def register_datasets(register):
    from omnistory_core import data

    register("demo", data.load_dataset)
    register("omnistorybench", data.load_dataset)


@hookimpl
def register_tasks(register):
    from omnistory_core.builtin.omnistorybench import OMNISTORYBENCH

    register(OMNISTORYBENCH)


def _plugins(argv: list[str]) -> int:
    from omnistory_core.cli_plugins import main

    return main(argv)


def _tasks(argv: list[str]) -> int:
    from omnistory_core.cli_plugins import tasks_main

    return tasks_main(argv)


def _scaffold(argv: list[str]) -> int:
    from omnistory_core.scaffold import main

    return main(argv)


def _env(argv: list[str]) -> int:
    from omnistory_core.environments import main

    return main(argv)


def _progress(argv: list[str]) -> int:
    from omnistory_core.engine.sweep_progress import main

    return main(argv)


@hookimpl
def register_commands(register):
    register("plugins", _plugins, "plugins, what they register, load errors, parameters")
    register("tasks", _tasks, "the installed benchmarks (tasks)")
    register("plugin", _scaffold, "plugin new NAME --kind KIND: a new plugin distribution")
    register("env", _env, "env create tts=parler: a virtual environment for one component")
    register("progress", _progress, "a sweep's progress, from another terminal (--watch)")
