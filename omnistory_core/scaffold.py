"""``python -m omnistory_core plugin new NAME --kind KIND [--produces M,M] [--dir D]``: a new
plugin distribution.

It writes ``D/omnistory-NAME/``, a complete distribution that installs and passes its own tests as
generated: ``pyproject.toml`` with the ``omnistory`` entry point and a ``test`` extra, the
component (offline and deterministic, with comments marking where the model call goes), one preset
(a system for a generation component, a scored demo sweep for a metric or judge), a README, a
``.gitignore`` and tests (the plugin kit's ``check_component`` for a generation component; the
``evaluate`` path for a metric or judge). A backbone's ``--produces`` picks its shape:
``text,image,speech`` (any-to-any, the default), ``text,image`` (T+I: its preset adds
``tts=espeak``) or ``text,speech`` (T+S: its preset adds ``image=copy``).

The templates are the ``*.tmpl`` files of ``omnistory_core/scaffold_templates`` (package data),
filled with :class:`string.Template` (``${name}``), since Python and YAML use braces themselves.
"""

from __future__ import annotations

import argparse
import keyword
import os
import re
import shutil
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# long enough for any sensible name, short enough that every generated line stays within 100
# columns (tests/test_scaffold.py lints the output at this length)
_MAX_NAME = 24


@dataclass(frozen=True)
class KindSpec:
    """What differs between the kinds of component a plugin can add."""

    hook: str  # the register_* hook of omnistory_core.hookspecs
    module: str  # the component's module inside the package
    suffix: str  # the class name is the CamelCase NAME + suffix
    preset_group: str  # config group of the preset the plugin ships
    preset: str  # preset name; {name} is the component name
    label: str  # for the README and the description


KINDS: dict[str, KindSpec] = {
    "planner": KindSpec(
        "register_planners", "planner", "Planner", "system", "{name}_copy_espeak", "planner"
    ),
    "image": KindSpec(
        "register_image_experts",
        "image_expert",
        "ImageExpert",
        "system",
        "template_{name}_espeak",
        "image expert",
    ),
    "tts": KindSpec(
        "register_tts_experts", "tts", "TTS", "system", "template_copy_{name}", "TTS expert"
    ),
    # a backbone's preset and label depend on its shape: BackboneShape below
    "backbone": KindSpec(
        "register_backbones", "backbone", "Backbone", "system", "{name}", "backbone"
    ),
    "metric": KindSpec("register_metrics", "metric", "Metric", "suite", "{name}_demo", "metric"),
    "judge": KindSpec("register_judges", "judge", "Judge", "suite", "{name}_demo", "judge"),
}

#: the order a shape's modalities are named in (``--produces image,text`` is ``text,image``)
_MODALITIES = ("text", "image", "speech")


@dataclass(frozen=True)
class BackboneShape:
    """What differs between backbones by the modalities they make themselves (CONTRIBUTING.md,
    "Adding a backbone"): the templates, the preset and the expert it adds for the rest."""

    produces: str  # the --produces value, modalities in _MODALITIES order
    templates: str  # folder of omnistory_core/scaffold_templates
    preset: str  # preset name; {name} is the component name
    expert: str  # the override its systems add for what it does not make ("" for any-to-any)
    label: str  # for the description and the README
    about: str  # the README's sentence on who makes what


SHAPES: dict[str, BackboneShape] = {
    shape.produces: shape
    for shape in (
        BackboneShape(
            "text,image,speech",
            "backbone",
            "{name}",
            "",
            "any-to-any backbone",
            "It makes the next page's narration, illustration and speech itself, in one call per"
            " example.",
        ),
        BackboneShape(
            "text,image",
            "backbone_text_image",
            "{name}_espeak",
            "tts=espeak",
            "T+I backbone",
            "It makes the next page's narration and illustration itself (semi-orchestration, T+I);"
            ' a TTS expert (`tts=espeak` in its preset) speaks the `plan["speech"]` it returns.',
        ),
        BackboneShape(
            "text,speech",
            "backbone_text_speech",
            "{name}_copy",
            "image=copy",
            "T+S backbone",
            "It makes the next page's narration and speech itself (semi-orchestration, T+S); an"
            " image expert (`image=copy` in its preset; `image=dev` draws the prompt) renders the"
            ' `plan["image_prompt"]` it returns.',
        ),
    )
}
DEFAULT_SHAPE = "text,image,speech"

#: how the README tells a user to run the component once installed
_RUN_LINES = {
    "planner": "python -m omnistory_core planner=${name} dataset.limit=2",
    "image": "python -m omnistory_core image=${name} dataset.limit=2",
    "tts": "python -m omnistory_core tts=${name} dataset.limit=2",
    "backbone": "python -m omnistory_core backbone=${name} ${expert}dataset.limit=2",
    "metric": "python -m omnistory_core evaluate outputs/sweeps/demo --metrics ${name}",
    "judge": "python -m omnistory_core evaluate outputs/sweeps/demo --metrics '' --judges ${name}",
}


class ScaffoldError(Exception):
    """A name or a target directory the scaffold refuses (one line for the user)."""


def class_name(name: str, kind: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part) + KINDS[kind].suffix


def check_name(name: str, kind: str) -> None:
    if not _NAME.match(name) or len(name) > _MAX_NAME or name.endswith("_") or "__" in name:
        raise ScaffoldError(
            f"plugin name {name!r}: use lowercase letters, digits and single underscores, starting"
            f" with a letter, at most {_MAX_NAME} characters (e.g. my_model); users type it as"
            f" {kind}=my_model and it becomes the package omnistory_my_model"
        )
    if keyword.iskeyword(name):
        raise ScaffoldError(f"plugin name {name!r} is a Python keyword; choose another")


def backbone_shape(kind: str, produces: str | None) -> BackboneShape | None:
    """The shape ``--produces`` asks for (any-to-any when not given); None for other kinds."""
    if kind != "backbone":
        if produces is not None:
            raise ScaffoldError(
                f"--produces is for --kind backbone only (a {kind}'s output is fixed by its kind)"
            )
        return None
    if produces is None:
        return SHAPES[DEFAULT_SHAPE]
    given = {m.strip().lower() for m in produces.split(",") if m.strip()}
    unknown = sorted(given - set(_MODALITIES))
    if unknown:
        raise ScaffoldError(
            f"--produces {produces!r}: unknown modality {', '.join(unknown)}; use text, image,"
            " speech"
        )
    shapes = " | ".join(SHAPES)
    if "text" not in given:
        # nothing but the backbone writes the narration, so every shape includes text
        raise ScaffoldError(
            f"--produces {produces!r} lacks text: nothing but the backbone writes the narration;"
            f" one of {shapes}"
        )
    shape = SHAPES.get(",".join(m for m in _MODALITIES if m in given))
    if shape is None:
        raise ScaffoldError(
            f"--produces {produces!r}: a model making text alone is a planner (--kind planner);"
            f" a backbone is one of {shapes}"
        )
    return shape


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


def _template(relative: str) -> str:
    return (
        resources.files("omnistory_core.scaffold_templates")
        .joinpath(relative)
        .read_text(encoding="utf-8")
    )


def preset_name(name: str, kind: str, shape: BackboneShape | None = None) -> str:
    return (shape.preset if shape else KINDS[kind].preset).format(name=name)


def run_line(name: str, kind: str, shape: BackboneShape | None = None) -> str:
    """The command that runs the component itself (a backbone with the expert its shape needs)."""
    expert = f"{shape.expert} " if shape and shape.expert else ""
    return Template(_RUN_LINES[kind]).substitute(name=name, expert=expert)


def _values(name: str, kind: str, shape: BackboneShape | None) -> dict[str, str]:
    """The templates' placeholders."""
    spec = KINDS[kind]
    preset = preset_name(name, kind, shape)
    label = shape.label if shape else spec.label
    intro = f"An omnistory {label}, `{kind}={name}`, packaged as a plugin for omnistory_core."
    return {
        "name": name,
        "kind": kind,
        "label": label,
        "intro": f"{intro} {shape.about}" if shape else intro,
        "dist": "omnistory-" + name.replace("_", "-"),
        "package": f"omnistory_{name}",
        "module": spec.module,
        "cls": class_name(name, kind),
        "hook": spec.hook,
        "preset": preset,
        "preset_group": spec.preset_group,
        "core_version": _version("omnistory-core"),
        "testkit_version": _version("omnistory-testkit"),
        "run_line": run_line(name, kind, shape),
        "preset_line": preset_line(kind, preset),
    }


def plan_files(name: str, kind: str, shape: BackboneShape | None = None) -> dict[str, str]:
    """The distribution's files, path relative to its root -> text."""
    if kind == "backbone" and shape is None:
        shape = SHAPES[DEFAULT_SHAPE]
    values = _values(name, kind, shape)
    folder = shape.templates if shape else kind

    def fill(relative: str) -> str:
        # strict: a placeholder left in a template is a bug here, never something to ship
        return Template(_template(relative)).substitute(values)

    src = f"src/{values['package']}"
    group, preset = values["preset_group"], values["preset"]
    return {
        "pyproject.toml": fill("common/pyproject.toml.tmpl"),
        "README.md": fill("common/README.md.tmpl"),
        ".gitignore": fill("common/gitignore.tmpl"),
        f"{src}/__init__.py": fill("common/__init__.py.tmpl"),
        f"{src}/plugin.py": fill("common/plugin.py.tmpl"),
        f"{src}/{values['module']}.py": fill(f"{folder}/component.py.tmpl"),
        f"{src}/conf/__init__.py": "",
        f"{src}/conf/{group}/{preset}.yaml": fill(f"{folder}/preset.yaml.tmpl"),
        f"tests/test_{name}.py": fill(f"{folder}/test.py.tmpl"),
    }


def preset_line(kind: str, preset: str) -> str:
    """The command that runs the shipped preset (a suite is a sweep: ``-m``)."""
    group = KINDS[kind].preset_group
    flag = "-m " if group == "suite" else ""
    return f"python -m omnistory_core {flag}{group}={preset} dataset.limit=2"


def _version(dist: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "0.1.0"


def new_plugin(name: str, kind: str, directory: Path, produces: str | None = None) -> Path:
    """Write the distribution under ``directory`` and return its root."""
    if kind not in KINDS:
        raise ScaffoldError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    shape = backbone_shape(kind, produces)
    check_name(name, kind)
    root = directory / ("omnistory-" + name.replace("_", "-"))
    if root.exists():
        raise ScaffoldError(f"{root} already exists; not overwriting it (choose another --dir)")
    check_free(name, kind)
    files = plan_files(name, kind, shape)
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
    new.add_argument("--dir", type=Path, default=Path("."), help="where to create it (default .)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        root = new_plugin(args.name, args.kind, args.dir, args.produces)
        shape = backbone_shape(args.kind, args.produces)
    except (ScaffoldError, OSError) as exc:
        print(f"omnistory: error: {exc}", file=sys.stderr)
        return 2
    what = f"{args.kind}={args.name}" + (f", produces {shape.produces}" if shape else "")
    print(f"wrote {root}/ ({what}); next:")
    print(f"  pip install -e '{root}[test]'")
    print(f"  pytest {root}/tests")
    print(f"  {preset_line(args.kind, preset_name(args.name, args.kind, shape))}")
    print(f"  {run_line(args.name, args.kind, shape)}")
    return 0
