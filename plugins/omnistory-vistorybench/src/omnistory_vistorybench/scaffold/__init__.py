"""``python -m omnistory_core plugin new NAME --kind KIND --task vistorybench [--unit group]``:
the templates of a ViStoryBench component (``Task.scaffold``; see
:mod:`omnistory_core.kit.scaffolding`).

Each kind's folder holds the component (a deterministic offline stand-in reading the task's
inputs: the official merged prompt, the shot's fields, the onstage characters' reference
images), a preset of the task, and tests on the bundled fixture (``dataset=vistory_fixture``):
``check_component`` on the fixture and a run through the CLI.  ViStoryBench makes images only, so
there is no TTS template, and a backbone makes at least text and image.
"""

from __future__ import annotations

from omnistory_core.kit.scaffolding import KindTemplate, templates_table


def _run(choices: str) -> str:
    """How a user runs the component (``${name}``, ``${fixture}``: the scaffold fills them)."""
    return f"python -m omnistory_core task=vistorybench {choices} dataset=${{fixture}}"


def _score(flags: str) -> str:
    """How a user scores the fixture's copy_paste run with the evaluator."""
    return f"python -m omnistory_core evaluate outputs/runs/${{fixture}}/copy_paste {flags}"


TEMPLATES: dict[str, KindTemplate] = templates_table(
    KindTemplate(
        "image",
        "image",
        "system",
        "{name}",
        _run("image=${name}"),
        "ViStoryBench image expert",
        "It draws each shot from the official merged prompt and the onstage characters' reference"
        " images, one call per shot.",
    ),
    KindTemplate(
        "image",
        "image_group",
        "system",
        "{name}",
        _run("image=${name}"),
        "story-level ViStoryBench image expert",
        'It draws a whole story in one call (`unit = "group"`), each shot with the previous'
        " shot's picture in view.",
        unit="group",
    ),
    KindTemplate(
        "planner",
        "planner",
        "system",
        "{name}_noop",
        _run("planner=${name} image=noop"),
        "ViStoryBench planner",
        "It writes each shot's image prompt from its storyboard; the image expert of the system"
        " draws it (`image=noop` in its preset: a flat colour; `image=dev` draws the prompt).",
    ),
    KindTemplate(
        "backbone",
        "backbone",
        "system",
        "{name}",
        _run("backbone=${name}"),
        "ViStoryBench T+I backbone",
        "It makes each shot's image (and a line of narration) itself; ViStoryBench scores the"
        " image.",
        produces="text,image",
    ),
    KindTemplate(
        "backbone",
        "backbone",
        "system",
        "{name}",
        _run("backbone=${name}"),
        "ViStoryBench any-to-any backbone",
        "It makes each shot's image, a line of narration and speech itself; ViStoryBench scores"
        " the image.",
        produces="text,image,speech",
    ),
    KindTemplate(
        "metric",
        "metric",
        "suite",
        "{name}_fixture",
        _score("--metrics ${name}"),
        "ViStoryBench metric",
        "It scores each shot's image against the shot (item scope), beside the official metrics.",
    ),
    KindTemplate(
        "judge",
        "judge",
        "suite",
        "{name}_fixture",
        _score("--metrics '' --judges ${name}"),
        "ViStoryBench judge",
        "It asks a model how well each shot's image shows the shot's setting (item scope).",
    ),
)

__all__ = ["TEMPLATES"]
