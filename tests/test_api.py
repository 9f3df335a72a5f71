"""``omnistory_core.api`` is the one place listing what a plugin may import."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import omnistory_core
from omnistory_core import api

ROOT = Path(__file__).resolve().parents[1]
#: the first-party plugins: written against the public API only
PLUGINS = sorted(p.name for p in ROOT.glob("plugins/*") if (p / "src").is_dir())


def core_imports(files: list[Path]) -> list[tuple[Path, int, str, str]]:
    """``(file, line, module, name)`` for every ``from omnistory_core... import name``."""
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "omnistory_core"
            ):
                found += [(path, node.lineno, str(node.module), a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                found += [
                    (path, node.lineno, a.name, "")
                    for a in node.names
                    if a.name.startswith("omnistory_core")
                ]
    return found


def plugin_sources(*names: str) -> list[Path]:
    dirs = [ROOT / "plugins" / n for n in names] if names else sorted(ROOT.glob("plugins/*"))
    return sorted(p for d in dirs for p in (d / "src").rglob("*.py"))


def test_every_exported_name_resolves_once() -> None:
    assert len(api.__all__) == len(set(api.__all__)), "a name is listed twice"
    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert missing == []
    # and nothing public is left out of __all__ by accident
    public = {
        n for n, v in vars(api).items() if not n.startswith("_") and not isinstance(v, type(api))
    }
    assert public - {"annotations"} == set(api.__all__)


def test_error_types_are_the_ones_the_core_raises() -> None:
    from omnistory_core.errors import ConfigError as job_config_error
    from omnistory_core.kit.planning.base import PlannerConfigError
    from omnistory_core.params import ParamError

    assert api.ConfigError is job_config_error  # the old location keeps working
    assert issubclass(api.ParamError, api.ConfigError) and api.ParamError is ParamError
    assert issubclass(PlannerConfigError, api.ParamError)
    assert api.PlannerConfigError is PlannerConfigError
    assert issubclass(api.ComponentError, Exception)


def test_every_core_import_of_a_plugin_is_public_api() -> None:
    """Each ``from omnistory_core.X import Y`` in plugins/*/src resolves where it is written and
    is the same object as ``omnistory_core.api.Y``."""
    problems = []
    for path, line, module, name in core_imports(plugin_sources()):
        where = f"{path.relative_to(ROOT)}:{line}: from {module} import {name}"
        if not name:
            problems.append(f"{where}: import a name from omnistory_core.api instead")
            continue
        value = getattr(importlib.import_module(module), name, None)
        if value is None:
            problems.append(f"{where}: does not resolve")
        elif name not in api.__all__ or getattr(api, name) is not value:
            problems.append(f"{where}: not exported by omnistory_core.api")
    assert problems == []


@pytest.mark.parametrize("plugin", PLUGINS)
def test_first_party_plugins_import_only_the_public_api(plugin: str) -> None:
    modules = {module for _, _, module, _ in core_imports(plugin_sources(plugin))}
    assert modules <= {"omnistory_core.api"}


def test_package_is_typed() -> None:
    assert (Path(omnistory_core.__file__).parent / "py.typed").is_file()
