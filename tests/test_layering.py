"""Layering of the whole repository (the core and every distribution under ``plugins/``): no import
circle at file level or at package level (not even through imports inside functions), the core
imports none of the distributions that plug into it, and the old-name modules are gone.

The import graph comes from ``tools/import_cycles.py`` (sources parsed, nothing imported).
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "omnistory_core"
EVAL = ROOT / "plugins/omnistory-eval/src/omnistory_eval"
REPORT = ROOT / "plugins/omnistory-report/src/omnistory_report"
TESTKIT = ROOT / "plugins/omnistory-testkit/src/omnistory_testkit"
#: the core and the import package of every distribution under plugins/ (src layout)
PACKAGES = (CORE,) + tuple(
    sorted(
        package
        for src in (ROOT / "plugins").glob("*/src")
        for package in src.iterdir()
        if (package / "__init__.py").is_file()
    )
)


def _tool():
    spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "tools/import_cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cycles = _tool()


@functools.cache
def _graph(lazy: bool) -> dict[str, set[str]]:
    """The repository's import graph, parsed once for all the tests here (about 3 s each)."""
    return cycles.import_graph(PACKAGES, lazy=lazy)


def test_every_distribution_is_analysed() -> None:
    distributions = sorted(p.parent.name for p in (ROOT / "plugins").glob("*/pyproject.toml"))
    analysed = {p.parents[1].name for p in PACKAGES[1:]}
    assert [d for d in distributions if d not in analysed] == []
    assert {
        EVAL,
        REPORT,
        TESTKIT,
        ROOT / "plugins/omnistory-vistorybench/src/omnistory_vistorybench",
    } <= set(PACKAGES)


def test_no_module_level_import_cycle() -> None:
    found = cycles.describe(_graph(False))
    assert not found, "module-level import cycles:\n" + "\n".join(found)


def test_no_import_cycle_even_through_imports_inside_functions() -> None:
    """An import inside a function still ties two modules together: none may close a circle.
    (Fix one by moving what both modules need into the lower one or a small leaf module, as
    ``omnistory_core.errors`` and ``omnistory_testkit._common`` are.)"""
    graph = _graph(True)
    assert sum(map(len, graph.values())) > sum(map(len, _graph(False).values())), (
        "no import inside a function found: lazy imports not counted"
    )
    found = cycles.describe(graph)
    assert not found, "import cycles through imports inside functions:\n" + "\n".join(found)


def test_no_package_level_import_loop() -> None:
    """Rooms (``omnistory_core.engine``, ``omnistory_core.kit``, ``omnistory_eval.judges``,
    ``omnistory_core.plugins``, ...) form no loop either, lazy imports included."""
    rooms = cycles.package_graph(_graph(True))
    assert "omnistory_core.engine" in rooms and "omnistory_core.kit" in rooms
    found = cycles.describe(rooms)
    assert not found, "package-level import loops:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        (CORE, ("omnistory_eval", "omnistory_report", "omnistory_testkit")),
        (EVAL, ("omnistory_report", "omnistory_testkit")),
        (REPORT, ("omnistory_testkit",)),
    ],
    ids=["core", "eval", "report"],
)
def test_a_distribution_imports_only_what_it_depends_on(
    package: Path, forbidden: tuple[str, ...]
) -> None:
    graph = _graph(True)
    own = package.name
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.split(".")[0] == own
        for target in targets
        if target.split(".")[0] in forbidden
    )
    assert not wrong, "\n".join(wrong)


def test_finder_sees_cycles(tmp_path: Path) -> None:
    """The finder reports a module-level cycle (also through a package __init__), keeps a lazy
    one apart, ignores TYPE_CHECKING imports, and sees a loop between rooms."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("import pkg.sub.c\n")
    (pkg / "sub" / "__init__.py").write_text("from pkg.a import x\n")
    (pkg / "sub" / "c.py").write_text("")
    (pkg / "lazy1.py").write_text("def f():\n    from . import lazy2\n")
    (pkg / "lazy2.py").write_text("from .lazy1 import f\n")
    (pkg / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import typed2\n"
    )
    (pkg / "typed2.py").write_text("from pkg import typed\n")
    eager = cycles.strongly_connected(cycles.import_graph(pkg))
    assert eager == [["pkg.a", "pkg.b", "pkg.sub"]]
    full = cycles.strongly_connected(cycles.import_graph(pkg, lazy=True))
    assert full == [["pkg.a", "pkg.b", "pkg.sub"], ["pkg.lazy1", "pkg.lazy2"]]
    # rooms: no two modules import each other, yet room x and room y do
    (tmp_path / "two" / "x").mkdir(parents=True)
    (tmp_path / "two" / "y").mkdir()
    for path in ("two/__init__.py", "two/x/__init__.py", "two/y/__init__.py"):
        (tmp_path / path).write_text("")
    (tmp_path / "two/x/p.py").write_text("from two.y import q\n")
    (tmp_path / "two/y/q.py").write_text("def f():\n    from two.x import r\n")
    (tmp_path / "two/x/r.py").write_text("")
    graph = cycles.import_graph(tmp_path / "two", lazy=True)
    assert cycles.strongly_connected(graph) == []
    assert cycles.strongly_connected(cycles.package_graph(graph)) == [["two.x", "two.y"]]


OLD_MODULES = (
    "omnistory_core/plan.py",
    "omnistory_core/envs.py",
    "omnistory_core/voices.py",
    "omnistory_core/secrets.py",
    "omnistory_core/evaluation",
    "omnistory_core/planning",
    "omnistory_core/testing",
    "omnistory_core/report",
    "omnistory_core/analysis",
    "omnistory_core/human",
    "omnistory_core/batch_api.py",
    "omnistory_core/retry.py",
    "omnistory_core/checkout.py",
    "omnistory_core/hub.py",
    "omnistory_core/experts",
    "conf",
    "setup.py",
)


def test_old_name_modules_are_gone() -> None:
    """Nothing is released: moved modules keep no compatibility copy under their old name."""
    left = [name for name in OLD_MODULES if (ROOT / name).exists()]
    assert not left, left
    sources = "\n".join(p.read_text() for p in CORE.rglob("*.py"))
    assert "sys.modules[__name__] =" not in sources


#: the largest a module may be (CONTRIBUTING: small modules); checked where the house was split
MAX_MODULE_LINES = 500


def test_no_module_of_the_vistorybench_plugin_is_over_500_lines() -> None:
    package = ROOT / "plugins/omnistory-vistorybench/src/omnistory_vistorybench"
    sizes = {
        str(path.relative_to(package)): len(path.read_text(encoding="utf-8").splitlines())
        for path in package.rglob("*.py")
    }
    assert len(sizes) > 20
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}
