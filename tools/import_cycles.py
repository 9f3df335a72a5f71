#!/usr/bin/env python3
"""Find import cycles among the modules of a package (default: ``omnistory_core``).

The sources are parsed, nothing is imported.  An import counts as *module-level* when it runs at
import time: a top-level statement, or one inside a top-level ``if``/``try``/``with`` or a class
body.  An import inside a function body is *lazy*; it runs when the function is called, so it
cannot make ``import x`` fail half-way, but it still ties the two modules together.  Imports under
``if TYPE_CHECKING:`` never run and are ignored.

An edge goes to the module an import names: ``from a.b import c`` is an edge to ``a.b.c`` when
that is a module of the package, else to ``a.b``.  The parent packages an import executes on the
way (``a/__init__.py`` for ``import a.b``) are edges too, except the importing module's own parent
packages: those are already being imported when it runs (a package ``__init__`` that imports its
submodules, which import their siblings, is the ordinary case, not a cycle).

Usage::

    python tools/import_cycles.py            # module-level cycles, then those through lazy imports
    python tools/import_cycles.py --package-dir path/to/pkg

Exit status 1 when a module-level cycle exists.  ``tests/test_layering.py`` asserts that there is
no cycle at all, lazy imports included.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

Graph = dict[str, set[str]]


def module_names(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` file of the package."""
    root = package_dir.parent
    names: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """(import statement, lazy?) for every import that can run."""

    def walk(nodes: Iterable[ast.stmt], lazy: bool) -> Iterator[tuple[ast.AST, bool]]:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node, lazy
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(node.body, True)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from walk(node.orelse, lazy)
            else:
                for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                    children = getattr(node, field, None) or []
                    for child in children:
                        # except handlers and match cases hold their statements in .body
                        if isinstance(child, ast.ExceptHandler) or type(child).__name__ == (
                            "match_case"
                        ):
                            yield from walk(child.body, lazy)
                        elif isinstance(child, ast.stmt):
                            yield from walk([child], lazy)

    yield from walk(tree.body, False)  # type: ignore[misc]


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(package_dir: Path | Iterable[Path], *, lazy: bool = False) -> Graph:
    """Edges between the package's modules (several packages: between all of theirs);
    ``lazy=True`` adds imports inside functions."""
    dirs = [package_dir] if isinstance(package_dir, Path) else list(package_dir)
    modules: dict[str, Path] = {}
    for one in dirs:
        modules.update(module_names(one))
    graph: Graph = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        own_parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        for node, is_lazy in _imports(tree):
            if is_lazy and not lazy:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve(name, path.name == "__init__.py", node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                # `import a.b.c` names a.b.c; fall back to the longest prefix that is a module
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
                parts = target.split(".")
                for i in range(1, len(parts)):
                    parent = ".".join(parts[:i])
                    if parent in modules and parent not in own_parents and parent != name:
                        graph[name].add(parent)
    return graph


def room_of(module: str) -> str:
    """The room a module lives in: its top package's direct child (``omnistory_core.engine``
    for ``omnistory_core.engine.job``; ``omnistory_core.plugins`` for that module itself)."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: Graph) -> Graph:
    """The module graph collapsed to rooms (:func:`room_of`): a loop here is a package-level
    import loop even when no two modules import each other."""
    rooms: Graph = {}
    for module, targets in graph.items():
        room = room_of(module)
        edges = rooms.setdefault(room, set())
        for target in targets:
            other = room_of(target)
            if other != room:
                edges.add(other)
            rooms.setdefault(other, set())
    return rooms


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's algorithm (iterative); components of more than one module, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def shortest_cycle(graph: Graph, component: list[str]) -> list[str]:
    """One shortest cycle through the component's first module, as ``[a, b, ..., a]``."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return [start]


def describe(graph: Graph) -> list[str]:
    """One line per cycle group: its modules and one concrete cycle."""
    lines = []
    for component in strongly_connected(graph):
        cycle = " -> ".join(shortest_cycle(graph, component))
        lines.append(f"{len(component)} modules: {', '.join(component)}\n    e.g. {cycle}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--package-dir",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "omnistory_core",
    )
    args = parser.parse_args(argv)
    eager = import_graph(args.package_dir)
    full = import_graph(args.package_dir, lazy=True)
    for title, graph in (("module-level", eager), ("including lazy imports", full)):
        groups = describe(graph)
        edges = sum(len(v) for v in graph.values())
        print(f"{title}: {len(graph)} modules, {edges} edges, {len(groups)} cycle group(s)")
        for line in groups:
            print(f"  {line}")
    return 1 if strongly_connected(eager) else 0


if __name__ == "__main__":
    sys.exit(main())
