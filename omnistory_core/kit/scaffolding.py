"""What a task plugin declares so that ``python -m omnistory_core plugin new NAME --kind KIND
--task TASK [--unit item|group]`` writes a component of that task (``Task.scaffold``).

A task names a package (``Task.scaffold``) holding one folder of templates per kind it supports,
each with ``component.py.tmpl`` (the component, a deterministic offline stand-in reading the
task's inputs), ``preset.yaml.tmpl`` (a preset of that task) and ``test.py.tmpl`` (its tests on
the task's bundled fixture), and a ``TEMPLATES`` table in its ``__init__`` listing them as
:class:`KindTemplate` records.  The distribution's other files (pyproject, hook module,
README, ``.gitignore``) are the core's, the same for every task.

Templates are :class:`string.Template` text (``${name}``); the placeholders: ``name``, ``kind``,
``label``, ``cls`` (the class name), ``package``, ``module``, ``dist``, ``preset``,
``preset_group``, ``task``, ``fixture`` (the task's fixture dataset), ``produces`` (a backbone's
modalities as a Python set literal).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KindTemplate:
    """One component a task's scaffold writes.

    ``folder``: its templates' folder in the task's package; ``preset_group`` / ``preset``: the
    config group and name (``{name}`` is the component name) of the preset it ships;
    ``run_line``: how a user runs the component once installed (``${name}`` placeholders);
    ``label``: what it is, in words; ``about``: the README's sentence on what it does;
    ``unit``: ``item`` or ``group`` (one call per story); ``produces``: a backbone's shape
    (``text,image``)."""

    kind: str
    folder: str
    preset_group: str
    preset: str
    run_line: str
    label: str
    about: str = ""
    unit: str = "item"
    produces: str = ""


def template_key(kind: str, unit: str = "item", produces: str = "") -> str:
    """The key of a ``TEMPLATES`` table: ``kind``, ``kind/group`` or ``backbone/text,image``."""
    if produces:
        return f"{kind}/{produces}"
    return kind if unit == "item" else f"{kind}/{unit}"


def templates_table(*templates: KindTemplate) -> dict[str, KindTemplate]:
    """A ``TEMPLATES`` table from its records."""
    return {template_key(t.kind, t.unit, t.produces): t for t in templates}


__all__ = ["KindTemplate", "template_key", "templates_table"]
