"""Layering of omnistory_core: no import circles (not even through imports inside functions), and
moved modules and names still importable by their old names.

The import graph comes from ``tools/import_cycles.py`` (sources parsed, nothing imported).
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "omnistory_core"


def _tool():
    spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "tools/import_cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cycles = _tool()


def test_no_module_level_import_cycle() -> None:
    graph = cycles.import_graph(PACKAGE)
    assert "omnistory_core.app" in graph and graph["omnistory_core.app"], "graph not built"
    found = cycles.describe(graph)
    assert not found, "module-level import cycles:\n" + "\n".join(found)


def test_no_import_cycle_even_through_imports_inside_functions() -> None:
    """An import inside a function still ties two modules together: none may close a circle.
    (Fix one by moving what both modules need into the lower one or a small leaf module, as
    ``omnistory_core.errors`` and ``omnistory_core.testing._common`` are.)"""
    graph = cycles.import_graph(PACKAGE, lazy=True)
    assert sum(map(len, graph.values())) > sum(map(len, cycles.import_graph(PACKAGE).values())), (
        "no import inside a function found: lazy imports not counted"
    )
    found = cycles.describe(graph)
    assert not found, "import cycles through imports inside functions:\n" + "\n".join(found)


MOVED_NAMES = {
    # a name's old module -> (the module that defines it now, the name)
    "omnistory_core.engine.system": ("omnistory_core.errors", "ConfigError"),
    "omnistory_core.engine.job": ("omnistory_core.errors", "ConfigError"),
    "omnistory_core.api": ("omnistory_core.errors", "ConfigError"),
    "omnistory_core.testing.conformance": ("omnistory_core.testing._common", "registry_with"),
    "omnistory_core.testing": ("omnistory_core.testing._common", "ConformanceError"),
}


@pytest.mark.parametrize("old", sorted(MOVED_NAMES))
def test_moved_names_are_importable_from_their_old_modules(old: str) -> None:
    new, name = MOVED_NAMES[old]
    moved = getattr(importlib.import_module(new), name)
    assert getattr(importlib.import_module(old), name) is moved


def test_hydra_entry_point_is_in_no_cycle_even_through_lazy_imports() -> None:
    """app.py imports the run/ modules; nothing imports app back (evaluation used to)."""
    graph = cycles.import_graph(PACKAGE, lazy=True)
    for component in cycles.strongly_connected(graph):
        assert "omnistory_core.app" not in component, component
        assert "omnistory_core.evaluation.command" not in component, component
    importers = sorted(m for m, targets in graph.items() if "omnistory_core.app" in targets)
    assert importers == ["omnistory_core.__main__"], importers


def test_finder_sees_cycles(tmp_path: Path) -> None:
    """The finder reports a module-level cycle (also through a package __init__), keeps a lazy
    one apart and ignores TYPE_CHECKING imports."""
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


OLD_NAMES = {
    # old module -> (new module, a public name)
    "omnistory_core.plan": ("omnistory_core.plan_schema", "parse_plan"),
    "omnistory_core.secrets": ("omnistory_core.redaction", "redact"),
    "omnistory_core.envs": ("omnistory_core.environments", "create"),
    "omnistory_core.voices": ("omnistory_core.experts.voices", "voice_for"),
    "omnistory_core.evaluation.speech_metadata": (
        "omnistory_core.evaluation.speech_analysis",
        "metadata_accuracy",
    ),
}


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_old_module_names_are_the_new_modules(old: str) -> None:
    new, name = OLD_NAMES[old]
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    assert old_module is new_module
    assert getattr(old_module, name) is getattr(new_module, name)


def test_old_names_in_a_fresh_interpreter() -> None:
    """``import omnistory_core.secrets`` first (before the new name), private names included;
    the standard library's ``secrets`` is untouched."""
    code = (
        "import secrets, omnistory_core.secrets as s, omnistory_core.plan as p\n"
        "from omnistory_core.plan import _extract, parse_plan\n"
        "from omnistory_core.app import SweepCallback, load_examples, progress_bars, run\n"
        "from omnistory_core.evaluation.command import evaluator_config\n"
        "import omnistory_core.redaction, omnistory_core.plan_schema, omnistory_core.run.sweep\n"
        "assert s is omnistory_core.redaction and p is omnistory_core.plan_schema\n"
        "assert SweepCallback is omnistory_core.run.sweep.SweepCallback\n"
        "assert callable(secrets.token_hex) and parse_plan('{}').plan is None\n"
        "print(s.__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "omnistory_core.redaction"


def test_no_module_uses_an_old_name() -> None:
    """Inside omnistory_core and the first-party plugins only the new names are imported."""
    graph = cycles.import_graph(PACKAGE, lazy=True)
    shims = set(OLD_NAMES)
    users = sorted(m for m, targets in graph.items() if targets & shims and m not in shims)
    assert not users, f"modules importing an old name: {users}"
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "plugins").glob("*/src/**/*.py"))
        if any(
            f"{old} import" in text or f"import {old}\n" in text
            for old in shims
            for text in [path.read_text(encoding="utf-8")]
        )
    ]
    assert not offenders, f"plugins importing an old name: {offenders}"
