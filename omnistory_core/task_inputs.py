"""What a component of each kind may read on a task, declared by the task, and its table.

A task lists its inputs as :class:`TaskInput` records (``Task.input_docs``): the name a component
puts in ``reads``, the kinds that may read it (and, for an evaluator, the scope of the unit it
comes with), its type as the component receives it, one line saying what it holds, and the
official field it comes from.  A dict input documents its keys the same way (``keys``), a list
of dicts the keys of each item.

From that one declaration: ``python -m omnistory_core tasks --inputs TASK`` prints the table
(:func:`inputs_table`), CONTRIBUTING.md holds it for every first-party task (between
``<!-- task-inputs:TASK:start -->`` markers, refreshed by ``python -m omnistory_core.task_inputs
CONTRIBUTING.md`` and checked by a test), ``check_component`` holds a component's ``reads`` to it
(:func:`readable`), and ``plugin new --task`` writes components that read from it.

Plain data, no heavy import.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: the kinds of component, in the order a table lists them
KIND_ORDER: tuple[str, ...] = ("planner", "backbone", "image", "tts", "metric", "judge")
GENERATION_KINDS: tuple[str, ...] = ("planner", "backbone", "image", "tts")
EVALUATOR_KINDS: tuple[str, ...] = ("metric", "judge")


@dataclass(frozen=True)
class TaskInput:
    """One input of a task (or one key of a dict input).

    ``kinds``: who may ``reads`` it (a key inherits its input's); ``scope``: for metrics and
    judges, the unit it comes with (``item``, ``group``, ``run``); ``oracle``: a generation
    component sees it only with ``oracle = True`` (evaluators always); ``source``: the official
    field or function it comes from (``""``: made here); ``keys``: a dict's keys, or those of
    each item of a list.
    """

    name: str
    type: str
    doc: str
    kinds: tuple[str, ...] = ()
    source: str = ""
    scope: str = "item"
    oracle: bool = False
    keys: tuple[TaskInput, ...] = ()

    def readers(self) -> str:
        """Who reads it, as the table's column says it."""
        kinds = [k for k in KIND_ORDER if k in self.kinds]
        text = ", ".join(kinds)
        if set(kinds) & set(EVALUATOR_KINDS):
            text += f" ({self.scope} scope)"
        if self.oracle:
            text += " (generation: oracle only)" if set(kinds) - set(EVALUATOR_KINDS) else ""
        return text


def check_declaration(task_name: str, docs: Sequence[TaskInput], names: Iterable[str]) -> None:
    """A declaration's own mistakes: every name of ``names`` (the task's ``inputs`` and
    ``reference_inputs``) documented, no name twice for one scope, every input read by a known
    kind.  Raises ``ValueError`` naming the task and the input."""
    seen: set[tuple[str, str, str]] = set()
    for doc in docs:
        unknown = [k for k in doc.kinds if k not in KIND_ORDER]
        if not doc.kinds or unknown:
            raise ValueError(f"task {task_name}: input {doc.name!r} has kinds {doc.kinds!r}")
        for kind in doc.kinds:
            slot = (kind, doc.name, doc.scope)
            if slot in seen:
                raise ValueError(f"task {task_name}: input {doc.name!r} declared twice for {kind}")
            seen.add(slot)
    documented = {d.name for d in docs}
    missing = [n for n in names if n not in documented]
    if missing:
        raise ValueError(f"task {task_name}: inputs {missing} have no TaskInput in input_docs")


def readable(
    docs: Sequence[TaskInput], kind: str, *, oracle: bool = False, scope: str | None = None
) -> tuple[str, ...]:
    """The names a ``kind`` component may put in ``reads`` (an evaluator: of its ``scope``;
    oracle inputs only with ``oracle``), in declaration order."""
    out = []
    for doc in docs:
        # an evaluator reads the reference by design; a generation component only as an oracle
        hidden = doc.oracle and not oracle and kind not in EVALUATOR_KINDS
        if kind not in doc.kinds or hidden:
            continue
        if kind in EVALUATOR_KINDS and scope is not None and doc.scope != scope:
            continue
        out.append(doc.name)
    return tuple(dict.fromkeys(out))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _rows(doc: TaskInput, path: str, readers: str, depth: int) -> list[str]:
    source = f"`{_cell(doc.source)}`" if doc.source else ""
    rows = [f"| `{path}` | `{_cell(doc.type)}` | {readers} | {source} | {_cell(doc.doc)} |"]
    for key in doc.keys:
        # a list of dicts documents each item's keys: input[i]["key"]
        sub = f'{path}[i]["{key.name}"]' if doc.type.startswith("list") else f'{path}["{key.name}"]'
        rows += _rows(key, sub, "", depth + 1)
    return rows


def inputs_table(task: Any) -> str:
    """The task's inputs as one Markdown table: per input (and key) its type, who may read it,
    the official field it comes from and what it holds."""
    docs: Sequence[TaskInput] = getattr(task, "input_docs", ()) or ()
    lines = [
        "| input | type | read by | from | what it holds |",
        "|---|---|---|---|---|",
    ]
    scopes = {"item": 0, "group": 1, "run": 2}
    # what systems read first, in declaration order; then what evaluators score, by scope
    ranked = sorted(
        enumerate(docs),
        key=lambda e: (
            set(e[1].kinds) <= set(EVALUATOR_KINDS),
            scopes.get(e[1].scope, 3),
            e[0],
        ),
    )
    for _, doc in ranked:
        lines += _rows(doc, doc.name, doc.readers(), 0)
    return "\n".join(lines)


def block_markers(task_name: str) -> tuple[str, str]:
    return f"<!-- task-inputs:{task_name}:start -->", f"<!-- task-inputs:{task_name}:end -->"


def inputs_block(task: Any) -> str:
    """The marked block of CONTRIBUTING.md for one task, markers included."""
    start, end = block_markers(task.name)
    return "\n".join(
        [
            start,
            f"<!-- generated from task {task.name}'s declaration (python -m omnistory_core tasks"
            f" --inputs {task.name}); do not edit by hand -->",
            "",
            inputs_table(task),
            "",
            end,
        ]
    )


def replace_blocks(text: str, tasks: Iterable[Any]) -> str:
    """``text`` with the marked block of each task replaced by its rendered one (a task whose
    markers the text lacks is left out)."""
    for task in tasks:
        start, end = block_markers(task.name)
        i, j = text.find(start), text.find(end)
        if i < 0 or j < i:
            continue
        text = text[:i] + inputs_block(task) + text[j + len(end) :]
    return text


if __name__ == "__main__":  # python -m omnistory_core.task_inputs CONTRIBUTING.md: refresh it
    import sys
    from pathlib import Path

    from omnistory_core.plugins import load_plugins

    installed = list(load_plugins().tasks.values())
    for name in sys.argv[1:]:
        path = Path(name)
        path.write_text(replace_blocks(path.read_text(encoding="utf-8"), installed), "utf-8")


__all__ = [
    "EVALUATOR_KINDS",
    "GENERATION_KINDS",
    "KIND_ORDER",
    "TaskInput",
    "block_markers",
    "check_declaration",
    "inputs_block",
    "inputs_table",
    "readable",
    "replace_blocks",
]
