"""``python -m omnistory_core plugins --params [tts=parler ...]``: every component's declared
parameters (name, type, default, doc), the source of truth for what a component accepts."""

from __future__ import annotations

import json
from typing import Any

from omnistory_core.params import describe


def component_params(registry: Any, kind: str, name: str) -> list[dict[str, Any]] | None:
    """The rows of ``kind=name``'s parameters; for a wrapper (``own_parameters`` and an
    ``inner_parameter`` naming an inner component of its kind, which takes every other key), its
    own rows and then its default inner's, each marked ``"via": "inner=NAME"``."""
    cls = registry.component(kind, name)
    rows = describe(cls)
    if rows is not None:
        return rows
    return wrapper_params(registry, kind, cls)


def wrapper_params(registry: Any, kind: str, cls: type) -> list[dict[str, Any]] | None:
    own = getattr(cls, "own_parameters", None)
    inner = getattr(cls, "inner_parameter", None)
    if own is None or inner is None:
        return None
    rows = [p.row() for p in own]
    default = next((p.default for p in own if p.name == inner), None)
    if isinstance(default, str) and (kind, default) in registry.components:
        via = f"{inner}={default}"
        rows += [{**row, "via": via} for row in describe(registry.component(kind, default)) or []]
    return rows


def plugin_params(registry: Any, registers: dict[str, list[str]]) -> dict[str, Any]:
    """``{"tts/parler": [rows] | None}`` for the components one plugin registers."""
    return {
        f"{kind}/{name}": component_params(registry, kind, name)
        for kind, names in sorted(registers.items())
        for name in sorted(names)
        if (kind, name) in registry.components
    }


def selected(registry: Any, selections: list[str]) -> list[tuple[str, str]]:
    """``tts=parler`` or ``tts`` (every tts) or nothing (every component), as (kind, name)."""
    keys = sorted(registry.components)
    if not selections:
        return keys
    out: list[tuple[str, str]] = []
    for selection in selections:
        kind, _, name = selection.replace("/", "=").partition("=")
        if name:
            registry.component(kind, name)  # PluginError naming the known ones
            out.append((kind, name))
        else:
            out += [k for k in keys if k[0] == kind]
    return list(dict.fromkeys(out))


def _default(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value


def print_params(registry: Any, selections: list[str], as_json: bool = False) -> int:
    import sys

    from omnistory_core.errors import PluginError

    try:
        keys = selected(registry, selections)
    except PluginError as exc:
        print(f"omnistory: error: {exc}", file=sys.stderr)
        return 2
    data = {f"{k}/{n}": component_params(registry, k, n) for k, n in keys}
    if as_json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    from rich.console import Console

    console = Console()
    for key, rows in data.items():
        kind, name = key.split("/", 1)
        if rows is None:
            console.print(f"[bold]{kind}={name}[/bold]: not declared (see its yaml and README)")
            continue
        own = [r for r in rows if not r.get("via")]
        console.print(_table(f"{kind}={name}", own))
        inner = [r for r in rows if r.get("via")]
        if inner:
            via = inner[0]["via"]
            console.print(
                _table(
                    f"{kind}={name}: every other key goes to its inner {kind} expert ({kind}.{via},"
                    " the default), whose parameters are",
                    inner,
                )
            )
    return 0


def _table(title: str, rows: list[dict[str, Any]]) -> Any:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title), title_justify="left")
    for col in ("parameter", "type", "default", "doc"):
        table.add_column(col, overflow="fold")
    for row in rows:
        doc = row["doc"]
        if row["constraint"]:
            doc += f" [{row['constraint']}]"
        if row["runtime"]:
            doc += " (runtime: not in the cache key)"
        cells = (row["name"], row["type"], _default(row["default"]), doc)
        table.add_row(*map(escape, cells))
    return table
