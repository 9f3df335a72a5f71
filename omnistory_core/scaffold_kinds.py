"""The kinds ``plugin new`` writes, and Omni-StoryBench's templates of them (the core's own):
names, class names, presets, backbone shapes, story-level units.  Data and pure functions;
:mod:`omnistory_core.scaffold` writes the files."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from string import Template

from omnistory_core.kit.scaffolding import KindTemplate

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

#: Omni-StoryBench's story-level kinds (``--unit group``): the template folder of each
GROUP_FOLDERS: dict[str, str] = {"image": "image_group"}
GROUP_ABOUT = (
    'It is a book-level expert (`unit = "group"`): one call per book, each page drawn with'
    " the previous page's picture in view."
)
#: the units a component is called in
UNITS = ("item", "group")

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


def preset_name(name: str, kind: str, shape: BackboneShape | None = None) -> str:
    return (shape.preset if shape else KINDS[kind].preset).format(name=name)


def run_line(name: str, kind: str, shape: BackboneShape | None = None) -> str:
    """The command that runs the component itself (a backbone with the expert its shape needs)."""
    expert = f"{shape.expert} " if shape and shape.expert else ""
    return Template(_RUN_LINES[kind]).substitute(name=name, expert=expert)


def core_template(kind: str, unit: str = "item", produces: str | None = None) -> KindTemplate:
    """Omni-StoryBench's template of a kind (the core's own, :data:`KINDS` and :data:`SHAPES`)."""
    shape = backbone_shape(kind, produces)
    spec = KINDS[kind]
    if unit != "item":
        if kind not in GROUP_FOLDERS:
            raise ScaffoldError(
                f"--unit {unit} on task omnistorybench: the scaffold writes a book-level"
                f" {' or '.join(GROUP_FOLDERS)} expert; a {kind} is written per page (--unit item)"
            )
        folder, about = GROUP_FOLDERS[kind], GROUP_ABOUT
    else:
        folder, about = (shape.templates, shape.about) if shape else (kind, "")
    expert = f"{shape.expert} " if shape and shape.expert else ""
    return KindTemplate(
        kind=kind,
        folder=folder,
        preset_group=spec.preset_group,
        preset=shape.preset if shape else spec.preset,
        run_line=Template(_RUN_LINES[kind]).safe_substitute(expert=expert),
        label=(shape.label if shape else spec.label) + (" (book-level)" if unit == "group" else ""),
        about=about,
        unit=unit,
        produces=shape.produces if shape else "",
    )


__all__ = [
    "DEFAULT_SHAPE",
    "GROUP_FOLDERS",
    "KINDS",
    "SHAPES",
    "UNITS",
    "BackboneShape",
    "KindSpec",
    "ScaffoldError",
    "backbone_shape",
    "check_name",
    "class_name",
    "core_template",
    "preset_name",
    "run_line",
]
