"""The public surface of the core: ``omnistory_core.api`` (the contract), ``omnistory_core.kit.*``
(helpers, each module's ``__all__``) and the test kit ``omnistory_testkit``; the first-party
plugins, their code and their tests, import nothing else of the house."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import omnistory_core
from omnistory_core import api

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "omnistory_core" / "kit"
#: the distributions the core is split into: they are built with it and use its internals (the
#: layering test keeps them in order); the rules here are for plugins
HOUSE = {"omnistory-eval", "omnistory-report", "omnistory-testkit"}
#: the first-party plugins: written against the public surface only
PLUGINS = sorted(
    p.name for p in ROOT.glob("plugins/*") if (p / "src").is_dir() and p.name not in HOUSE
)
#: the distributions of the house besides the core, by import name: a plugin's tests reach
#: them through omnistory_testkit only
HOUSE_PACKAGES = ("omnistory_eval", "omnistory_report")


def core_imports(files: list[Path]) -> list[tuple[Path, int, str, str]]:
    """``(file, line, module, name)`` for every ``from omnistory_core... import name`` and
    ``(file, line, module, "")`` for every ``import omnistory_core...``."""
    return house_imports(files, ("omnistory_core",))


def house_imports(files: list[Path], packages: tuple[str, ...]) -> list[tuple[Path, int, str, str]]:
    """:func:`core_imports` for the top-level ``packages``."""
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                if str(node.module).split(".")[0] in packages:
                    found += [(path, node.lineno, str(node.module), a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                found += [
                    (path, node.lineno, a.name, "")
                    for a in node.names
                    if a.name.split(".")[0] in packages
                ]
    return found


def plugin_sources(*names: str) -> list[Path]:
    return sorted(p for n in names or PLUGINS for p in (ROOT / "plugins" / n / "src").rglob("*.py"))


def plugin_tests(*names: str) -> list[Path]:
    return sorted(
        p for n in names or PLUGINS for p in (ROOT / "plugins" / n / "tests").rglob("*.py")
    )


def kit_modules() -> list[str]:
    """Every module of ``omnistory_core.kit``, subpackages included."""
    found = []
    for path in sorted(KIT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def _is_kit(module: str) -> bool:
    return module == "omnistory_core.kit" or module.startswith("omnistory_core.kit.")


def _is_module(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def _builtin_component(module: str, name: str, value: object) -> bool:
    """A plugin's code may reuse a built-in component (``example_omni`` speaks with
    ``tts=espeak``): the class, listed in its ``omnistory_core.builtin`` module's ``__all__``."""
    from omnistory_core.components import Component

    return (
        module.startswith("omnistory_core.builtin.")
        and name in getattr(importlib.import_module(module), "__all__", ())
        and inspect.isclass(value)
        and issubclass(value, Component)
    )


def why_not_public(module: str, name: str, *, code: bool) -> str | None:
    """None when ``from module import name`` (``import module`` for an empty ``name``) is the
    public surface, else what is wrong.  ``code``: the import is in a plugin's code, not its
    tests (only code may reuse a built-in component)."""
    if not name:
        if module == "omnistory_core.api" or (_is_kit(module) and _is_module(module)):
            return None
        return "internal module: import from omnistory_core.api or omnistory_core.kit.*"
    submodule = f"{module}.{name}"
    if (submodule == "omnistory_core.api" or _is_kit(submodule)) and _is_module(submodule):
        return None  # a public module by name: ``from omnistory_core.kit import hub``
    if module != "omnistory_core.api" and not _is_kit(module):
        try:
            value = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            return "does not resolve"
        if code and _builtin_component(module, name, value):
            return None
        return "internal: import it from omnistory_core.api or its omnistory_core.kit module"
    try:
        target = importlib.import_module(module)
    except ImportError:
        return "does not resolve"
    if name in vars(target).get("__all__", ()) and hasattr(target, name):
        return None
    if module == "omnistory_core.api":
        return "not the contract: import it from its omnistory_core.kit module"
    return f"not in {module}.__all__"


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


def test_kit_modules_are_found() -> None:
    modules = kit_modules()
    assert {"omnistory_core.kit.retry", "omnistory_core.kit.planning"} <= set(modules)
    assert "omnistory_core.kit.planning.openai_chat" in modules


@pytest.mark.parametrize("module", kit_modules())
def test_every_kit_module_lists_its_public_surface(module: str) -> None:
    """A kit module's ``__all__`` is what a plugin may import from it: it must exist, be
    literally the module's own, name each thing once, and every name must resolve."""
    imported = importlib.import_module(module)
    names = vars(imported).get("__all__")
    assert isinstance(names, list | tuple), f"{module} defines no __all__"
    assert len(names) == len(set(names)), f"{module}.__all__ lists a name twice"
    assert [n for n in names if not hasattr(imported, n)] == []


def test_every_core_import_of_a_plugin_is_public() -> None:
    """Each ``from omnistory_core.X import Y`` in plugins/*/src and plugins/*/tests resolves where
    it is written and is public: ``Y`` in ``omnistory_core.api.__all__`` or in the ``__all__`` of
    its ``omnistory_core.kit`` module."""
    problems = []
    for files, code in ((plugin_sources(), True), (plugin_tests(), False)):
        for path, line, module, name in core_imports(files):
            why = why_not_public(module, name, code=code)
            if why:
                statement = f"from {module} import {name}" if name else f"import {module}"
                problems.append(f"{path.relative_to(ROOT)}:{line}: {statement}: {why}")
    assert problems == []


def test_plugin_tests_reach_the_house_through_the_test_kit() -> None:
    """A plugin's tests use the evaluation and report distributions through ``omnistory_testkit``
    (and the CLI), and only the test kit's public modules and names."""
    problems = []
    for path, line, module, name in house_imports(
        plugin_tests(), (*HOUSE_PACKAGES, "omnistory_testkit")
    ):
        statement = f"from {module} import {name}" if name else f"import {module}"
        where = f"{path.relative_to(ROOT)}:{line}: {statement}"
        if module.split(".")[0] in HOUSE_PACKAGES:
            problems.append(f"{where}: use omnistory_testkit (or run the CLI)")
        elif any(part.startswith("_") for part in (*module.split("."), name)):
            problems.append(f"{where}: private to the test kit")
    assert problems == []


@pytest.mark.parametrize("plugin", PLUGINS)
def test_first_party_plugins_import_only_the_public_surface(plugin: str) -> None:
    modules = {module for _, _, module, _ in core_imports(plugin_sources(plugin))}
    builtin = {m for m in modules if m.startswith("omnistory_core.builtin.")}
    assert {m for m in modules - builtin if not _is_kit(m)} <= {"omnistory_core.api"}
    tests = {module for _, _, module, _ in core_imports(plugin_tests(plugin))}
    assert {m for m in tests if not _is_kit(m)} <= {"omnistory_core.api"}


def test_the_test_kit_lists_its_helpers() -> None:
    import omnistory_testkit
    from omnistory_testkit import engine

    assert set(engine.__all__) <= set(omnistory_testkit.__all__)
    assert [n for n in omnistory_testkit.__all__ if not hasattr(omnistory_testkit, n)] == []
    assert all(getattr(omnistory_testkit, n) is getattr(engine, n) for n in engine.__all__)


def test_package_is_typed() -> None:
    assert (Path(omnistory_core.__file__).parent / "py.typed").is_file()
