"""``python -m omnistory_core plugin new NAME --kind KIND [--task TASK] [--unit item|group]
[--produces M,M] [--dir D]``: a new plugin distribution.

It writes ``D/omnistory-NAME/``, a complete distribution that installs and passes its own tests as
generated: ``pyproject.toml`` with the ``omnistory`` entry point and a ``test`` extra, the
component (offline and deterministic, with comments marking where the model call goes), one preset
(a system for a generation component, a scored sweep for a metric or judge), a README, a
``.gitignore`` and tests (the plugin kit's ``check_component`` for a generation component; the
``evaluate`` path for a metric or judge).  ``--task`` picks the benchmark the component is
written for (Omni-StoryBench by default): it reads that task's inputs, its preset is of that task
and its tests run on that task's bundled fixture.  ``--unit group`` writes a story-level
component (one call per story or book, each item conditioned on the previous one's output).  A
backbone's ``--produces`` picks its shape: ``text,image,speech`` (any-to-any, the default),
``text,image`` (T+I: its preset adds ``tts=espeak``) or ``text,speech`` (T+S: its preset adds
``image=copy``).

The templates are the ``*.tmpl`` files of ``omnistory_core/scaffold_templates`` (package data;
Omni-StoryBench's, and the files every distribution gets) and those of the package a task names
(``Task.scaffold``, :mod:`omnistory_core.kit.scaffolding`), filled with :class:`string.Template`
(``${name}``), since Python and YAML use braces themselves.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from omnistory_core.kit.scaffolding import KindTemplate, template_key
from omnistory_core.scaffold_kinds import (  # noqa: F401 - the scaffold's public names
    _MODALITIES,
    DEFAULT_SHAPE,
    GROUP_FOLDERS,
    KINDS,
    SHAPES,
    UNITS,
    BackboneShape,
    KindSpec,
    ScaffoldError,
    backbone_shape,
    check_name,
    class_name,
    core_template,
    preset_name,
    run_line,
)


def check_free(name: str, kind: str) -> None:
    """Refuse a name the core or an installed plugin already uses for this kind: a second
    registration is ignored (with a warning), and a core config of that name (``planner=default``,
    the judge panels) would be chosen instead of the new component."""
    from omnistory_core.plugins import load_plugins

    registry = load_plugins()
    if (kind, name) in registry.components:
        origin = registry.origins.get((kind, name), "another plugin")
        raise ScaffoldError(
            f"{kind}={name} is already registered (by {origin}); choose another NAME"
        )
    # one joinpath argument at a time: Python 3.10's Traversable takes a single child
    if resources.files("omnistory_core.conf").joinpath(kind).joinpath(f"{name}.yaml").is_file():
        raise ScaffoldError(
            f"{kind}={name} is a config of omnistory_core (conf/{kind}/{name}.yaml); choose another"
            " NAME"
        )


#: the core's templates: Omni-StoryBench's kinds, and the files every distribution gets
CORE_TEMPLATES = "omnistory_core.scaffold_templates"


@dataclass(frozen=True)
class Choice:
    """What ``plugin new`` writes: the task, its template of the kind, and where the templates
    live."""

    task: Any  # omnistory_core.tasks.Task
    template: KindTemplate
    package: str  # the templates' package (its kind folders)


def choose(kind: str, task: str | None, unit: str | None, produces: str | None) -> Choice:
    """The template ``--kind``/``--task``/``--unit``/``--produces`` ask for, or the one-line
    :class:`ScaffoldError` saying what the task offers."""
    import importlib

    from omnistory_core.errors import PluginError
    from omnistory_core.plugins import load_plugins
    from omnistory_core.tasks import DEFAULT_TASK

    unit = unit or "item"
    if unit not in UNITS:
        raise ScaffoldError(f"--unit {unit!r}: one of {', '.join(UNITS)}")
    try:
        chosen = load_plugins().task(task or DEFAULT_TASK)
    except PluginError as exc:
        raise ScaffoldError(str(exc)) from None
    if not chosen.scaffold:
        if chosen.name != DEFAULT_TASK:
            raise ScaffoldError(f"task {chosen.name} ships no plugin templates (Task.scaffold)")
        return Choice(
            chosen, core_template(kind, unit, produces), "omnistory_core.scaffold_templates"
        )
    try:
        table: dict[str, KindTemplate] = importlib.import_module(chosen.scaffold).TEMPLATES
    except (ImportError, AttributeError) as exc:
        raise ScaffoldError(
            f"task {chosen.name}: its templates ({chosen.scaffold}.TEMPLATES) cannot be read:"
            f" {type(exc).__name__}: {exc}"
        ) from None
    if kind != "backbone" and produces is not None:
        raise ScaffoldError(
            f"--produces is for --kind backbone only (a {kind}'s output is fixed by its kind)"
        )
    shapes = [t.produces for t in table.values() if t.kind == kind and t.produces]
    if kind == "backbone" and shapes:
        produces = _normalized(produces) if produces else shapes[-1]
    key = template_key(kind, unit, produces or "")
    if key not in table:
        offered = ", ".join(_offer(t) for t in table.values())
        raise ScaffoldError(
            f"task {chosen.name} has no template for {_offer_of(kind, unit, produces)};"
            f" it offers: {offered}"
        )
    return Choice(chosen, table[key], chosen.scaffold)


def _normalized(produces: str) -> str:
    given = {m.strip().lower() for m in produces.split(",") if m.strip()}
    return ",".join(m for m in _MODALITIES if m in given) or produces


def _offer_of(kind: str, unit: str, produces: str | None) -> str:
    text = f"--kind {kind}"
    text += f" --unit {unit}" if unit != "item" else ""
    return text + (f" --produces {produces}" if produces else "")


def _offer(template: KindTemplate) -> str:
    return _offer_of(template.kind, template.unit, template.produces or None)


def _values(name: str, choice: Choice) -> dict[str, str]:
    """The templates' placeholders."""
    from omnistory_core.scaffold_install import dependencies, task_distribution

    template, task = choice.template, choice.task
    spec = KINDS[template.kind]
    preset = template.preset.format(name=name)
    intro = f"An omnistory {template.label}, `{template.kind}={name}`"
    intro += f", for task {task.name}" if task.name != "omnistorybench" else ""
    intro += ", packaged as a plugin for omnistory_core."
    produces = ", ".join(f'"{m}"' for m in template.produces.split(",") if m)
    return {
        "name": name,
        "kind": template.kind,
        "label": template.label,
        "intro": f"{intro} {template.about}" if template.about else intro,
        "dist": "omnistory-" + name.replace("_", "-"),
        "package": f"omnistory_{name}",
        "module": spec.module,
        "cls": class_name(name, template.kind),
        "hook": spec.hook,
        "preset": preset,
        "preset_group": template.preset_group,
        "core_version": _version("omnistory-core"),
        "testkit_version": _version("omnistory-testkit"),
        "dependencies": ", ".join(f'"{d}"' for d in dependencies(task_distribution(task))),
        "run_line": Template(template.run_line).substitute(name=name, fixture=task.fixture),
        "preset_line": preset_line(template.preset_group, preset, task),
        "task": task.name,
        "fixture": task.fixture,
        "produces": "{" + produces + "}" if produces else "set()",
        "inputs_line": inputs_line(task),
    }


def inputs_line(task: Any) -> str:
    """The README's pointer to what each input holds."""
    if task.name == "omnistorybench":
        return (
            'What `item["conditions"]` and `item["metadata"]` hold, key by key: "What a'
            " component reads\" in omnistory_core's CONTRIBUTING.md."
        )
    return (
        f"What each input holds, key by key, and the official field it comes from:"
        f" `python -m omnistory_core tasks --inputs {task.name}`."
    )


def plan_files(name: str, choice: Choice) -> dict[str, str]:
    """The distribution's files, path relative to its root -> text."""
    values = _values(name, choice)
    folder = choice.template.folder

    def fill(relative: str, package: str = CORE_TEMPLATES) -> str:
        # strict: a placeholder left in a template is a bug here, never something to ship
        text = resources.files(package).joinpath(relative).read_text(encoding="utf-8")
        return Template(text).substitute(values)

    src = f"src/{values['package']}"
    group, preset = values["preset_group"], values["preset"]
    own = choice.package
    return {
        "pyproject.toml": fill("common/pyproject.toml.tmpl"),
        "README.md": fill("common/README.md.tmpl"),
        ".gitignore": fill("common/gitignore.tmpl"),
        f"{src}/__init__.py": fill("common/__init__.py.tmpl"),
        f"{src}/plugin.py": fill("common/plugin.py.tmpl"),
        f"{src}/{values['module']}.py": fill(f"{folder}/component.py.tmpl", own),
        f"{src}/conf/__init__.py": "",
        f"{src}/conf/{group}/{preset}.yaml": fill(f"{folder}/preset.yaml.tmpl", own),
        f"tests/test_{name}.py": fill(f"{folder}/test.py.tmpl", own),
    }


def preset_line(group: str, preset: str, task: Any = None) -> str:
    """The command that runs the shipped preset (a suite is a sweep: ``-m``) on a small dataset:
    the demo's first examples, or the task's fixture."""
    flag = "-m " if group == "suite" else ""
    small = (
        f"dataset={task.fixture}"
        if task is not None and task.name != "omnistorybench"
        else "dataset.limit=2"
    )
    return f"python -m omnistory_core {flag}{group}={preset} {small}"


def _version(dist: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "0.1.0"


def new_plugin(
    name: str,
    kind: str,
    directory: Path,
    produces: str | None = None,
    *,
    task: str | None = None,
    unit: str | None = None,
) -> Path:
    """Write the distribution under ``directory`` and return its root."""
    if kind not in KINDS:
        raise ScaffoldError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    choice = choose(kind, task, unit, produces)
    check_name(name, kind)
    root = directory / ("omnistory-" + name.replace("_", "-"))
    if root.exists():
        raise ScaffoldError(f"{root} already exists; not overwriting it (choose another --dir)")
    check_free(name, kind)
    files = plan_files(name, choice)
    directory.mkdir(parents=True, exist_ok=True)
    # written aside and renamed at the end: a failure half-way leaves no half-made plugin behind
    staging = directory / f".{root.name}.partial-{os.getpid()}"
    staging.mkdir()
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        staging.rename(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return root


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="omnistory plugin", description="Start a plugin: a complete, tested distribution."
    )
    actions = parser.add_subparsers(dest="action", required=True)
    new = actions.add_parser(
        "new",
        help="write omnistory-NAME/: pyproject, component, preset, README, tests",
        description=__doc__.split("\n\n")[1] if __doc__ else None,  # None under python -OO
    )
    new.add_argument("name", help="component name users type (planner=NAME), e.g. my_model")
    new.add_argument("--kind", required=True, choices=tuple(KINDS))
    # checked by backbone_shape, not argparse: a refusal is one line, like the scaffold's others
    new.add_argument(
        "--produces",
        metavar="M,M",
        help=f"backbone only: what it makes itself, one of {' | '.join(SHAPES)} (default"
        f" {DEFAULT_SHAPE})",
    )
    new.add_argument(
        "--task",
        metavar="TASK",
        help="the benchmark it is written for: it reads that task's inputs, ships a preset of it"
        " and is tested on its fixture (default omnistorybench; python -m omnistory_core tasks)",
    )
    new.add_argument(
        "--unit",
        metavar="item|group",
        help="item: one call per example (default); group: one call per story or book, each"
        " item conditioned on the previous one's output",
    )
    new.add_argument("--dir", type=Path, default=Path("."), help="where to create it (default .)")
    return parser


def main(argv: list[str]) -> int:
    from omnistory_core.scaffold_install import install_lines

    args = _parser().parse_args(argv)
    try:
        choice = choose(args.kind, args.task, args.unit, args.produces)
        root = new_plugin(
            args.name, args.kind, args.dir, args.produces, task=args.task, unit=args.unit
        )
    except (ScaffoldError, OSError) as exc:
        print(f"omnistory: error: {exc}", file=sys.stderr)
        return 2
    template, task = choice.template, choice.task
    what = f"{args.kind}={args.name}"
    what += f", task {task.name}" if args.task else ""
    what += f", unit {template.unit}" if template.unit != "item" else ""
    what += f", produces {template.produces}" if template.produces else ""
    values = _values(args.name, choice)
    print(f"wrote {root}/ ({what}); next:")
    for line in install_lines(root, task):
        print(f"  {line}")
    print(f"  pytest {root}/tests")
    print(f"  {values['preset_line']}")
    print(f"  {values['run_line']}")
    return 0
