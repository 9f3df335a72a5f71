"""``python -m omnistory_core plugins``: what is installed, what it registers, what failed."""

from __future__ import annotations

import argparse
import json
from typing import Any


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="omnistory plugins", description=__doc__)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--params", action="store_true", help="each component's parameters: type, default, doc"
    )
    parser.add_argument("components", nargs="*", help="with --params: tts=parler, tts, ...")
    args = parser.parse_args(argv)

    from omnistory_core.cli_params import plugin_params, print_params
    from omnistory_core.plugins import load_plugins

    registry = load_plugins()
    if args.params or args.components:
        return print_params(registry, args.components, as_json=args.json)
    rows = []
    for name, info in sorted(registry.plugins.items(), key=lambda kv: (kv[0] != "builtin", kv[0])):
        rows.append(
            {
                "plugin": name,
                "distribution": info.distribution,
                "version": info.version,
                "registers": {k: sorted(v) for k, v in sorted(info.registers.items())},
                "error": info.error,
                "params": plugin_params(registry, info.registers),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="omnistory plugins")
    for col in ("plugin", "distribution", "version", "kind", "names", "load error"):
        table.add_column(col, overflow="fold")
    for row in rows:
        kinds = row["registers"] or {"-": []}
        for n, (kind, names) in enumerate(kinds.items()):
            table.add_row(
                row["plugin"] if n == 0 else "",
                row["distribution"] if n == 0 else "",
                row["version"] if n == 0 else "",
                kind,
                ", ".join(names) or "-",
                (row["error"] or "") if n == 0 else "",
            )
    Console().print(table)
    print_groups(registry)
    for row in rows:  # in full: the table folds long errors
        if row["error"]:
            where = f"{row['plugin']} ({row['distribution']} {row['version']})"
            print(f"load error: {where}: {row['error']}")
    print("Each component's parameters: python -m omnistory_core plugins --params [tts=NAME ...]")
    return 0


#: every group a user chooses from, in the order a system is described
GROUPS = ("task", "planner", "backbone", "image", "tts", "metric", "judge")


def print_groups(registry: Any) -> None:
    """Each group's installed names, "none installed" included (a kind no plugin registers is
    otherwise absent from the table)."""
    print("Installed, by group (choose with GROUP=NAME; metrics and judges with evaluation.*):")
    for group in GROUPS:
        names = sorted(registry.tasks) if group == "task" else registry.names(group)
        print(f"  {group}: {', '.join(names) or 'none installed'}")


def tasks_main(argv: list[str]) -> int:
    """``python -m omnistory_core tasks [--json] [--inputs TASK]``: the installed benchmarks, or
    every input a component of each kind may read on one of them."""
    parser = argparse.ArgumentParser(
        prog="omnistory tasks",
        description="The installed benchmarks (tasks) and what they declare.",
    )
    parser.add_argument("--json", action="store_true", help="each task's full declaration")
    parser.add_argument(
        "--inputs",
        metavar="TASK",
        help="every input a component of each kind may read on TASK: type, who reads it, the"
        " official field it comes from, what it holds",
    )
    args = parser.parse_args(argv)

    from omnistory_core.plugins import load_plugins

    registry = load_plugins()
    if args.inputs is not None:
        return print_inputs(registry, args.inputs, as_json=args.json)
    described = [task.describe() for _, task in sorted(registry.tasks.items())]
    if args.json:
        print(json.dumps(described, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="omnistory tasks (select one with task=NAME)")
    for col in ("task", "version", "datasets", "outputs", "tracks", "description"):
        table.add_column(col, overflow="fold")
    for row in described:
        table.add_row(
            row["name"],
            row["version"],
            ", ".join(f"{d} (fixture)" if d == row["fixture"] else d for d in row["datasets"]),
            ", ".join(f"{k}:{v}" for k, v in row["outputs"].items()),
            ", ".join(row["tracks"]),
            row["description"],
        )
    Console(width=160).print(table)
    return 0


def print_inputs(registry: Any, name: str, *, as_json: bool = False) -> int:
    """``tasks --inputs NAME``: the task's input table (as CONTRIBUTING.md shows it), or its
    declaration as JSON."""
    import dataclasses
    import sys

    from omnistory_core.errors import PluginError
    from omnistory_core.task_inputs import inputs_table

    try:
        task = registry.task(name)
    except PluginError as exc:
        print(f"omnistory: error: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps([dataclasses.asdict(d) for d in task.input_docs], indent=2))
        return 0
    if not task.input_docs:
        print(f"task {task.name} documents no inputs; the names it accepts: {task.inputs}")
        return 0
    print(f"What a component may read on task {task.name} (its `reads`):\n")
    print(inputs_table(task))
    return 0
