"""Plugin isolation through the real CLI: a plugin whose hooks do not match the specs is refused on
its own, and a preset that cannot be found names the plugin that failed to load.

The plugins are real installed distributions: a ``.dist-info`` (METADATA, entry_points.txt and a
RECORD listing the files, as pip writes it) next to the modules, in a folder put on PYTHONPATH.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from omnistory_testing import load_json, run_cli

QUIET = "engine.progress=false"


def _install(site: Path, dist: str, version: str, module: str, files: dict[str, str]) -> None:
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[omnistory]\n{module} = {module}\n")
    record = []
    for relative, text in files.items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        record.append(f"{relative},,")
    record += [f"{info.name}/{name},," for name in ("METADATA", "entry_points.txt", "RECORD")]
    (info / "RECORD").write_text("\n".join(record) + "\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    _install(
        site,
        "omnistory-typo",
        "1.0.0",
        "omnistory_typo",
        {
            "omnistory_typo.py": """
                from omnistory_core.hookspecs import hookimpl

                @hookimpl
                def register_planner(register):
                    raise AssertionError("a misspelled hook is never called")
            """
        },
    )
    _install(
        site,
        "omnistory-badargs",
        "0.3.0",
        "omnistory_badargs",
        {
            "omnistory_badargs.py": """
                from omnistory_core.hookspecs import hookimpl

                @hookimpl
                def register_planners(reg):
                    raise AssertionError("never called")
            """
        },
    )
    _install(
        site,
        "omnistory-noargs",
        "0.1.0",
        "omnistory_noargs",
        {
            "omnistory_noargs.py": """
                from omnistory_core.hookspecs import hookimpl

                @hookimpl
                def register_image_experts():
                    raise AssertionError("never called")
            """
        },
    )
    # ships a preset, but cannot be imported, so its config folder is never registered
    _install(
        site,
        "omnistory-presets",
        "2.0.0",
        "omnistory_presets",
        {
            "omnistory_presets/__init__.py": "import a_module_that_does_not_exist\n",
            "omnistory_presets/conf/__init__.py": "",
            "omnistory_presets/conf/system/fancy_preset.yaml": (
                "# @package _global_\nsystem_id: fancy_preset\n"
            ),
        },
    )
    # a healthy plugin next to the broken ones: its preset must keep working
    good_conf = site / "omnistory_good/conf"
    _install(
        site,
        "omnistory-good",
        "1.2.3",
        "omnistory_good",
        {
            "omnistory_good/__init__.py": f"""
                from omnistory_core.hookspecs import hookimpl

                @hookimpl
                def register_config_paths(register):
                    register({good_conf.as_uri()!r})
            """,
            "omnistory_good/conf/system/good_preset.yaml": (
                "# @package _global_\nsystem_id: good_preset\n"
            ),
        },
    )
    return site


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if "WARNING" in line]


def test_bad_hooks_reject_only_their_plugin(site: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(site)}
    proc = run_cli("plugins", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    warnings = _warnings(proc.stderr)
    assert len(warnings) == 4, proc.stderr  # typo, badargs, noargs, presets

    (typo,) = [line for line in warnings if "omnistory-typo 1.0.0" in line]
    assert "unknown hook 'register_planner'" in typo
    assert "did you mean 'register_planners'?" in typo
    (badargs,) = [line for line in warnings if "omnistory-badargs 0.3.0" in line]
    assert "PluginValidationError" in badargs and "reg" in badargs
    (noargs,) = [line for line in warnings if "omnistory-noargs 0.1.0" in line]
    assert "register_image_experts" in noargs and "'register'" in noargs

    listed = {p["plugin"]: p for p in json.loads(proc.stdout)}
    assert listed["omnistory_typo"]["error"].startswith("PluginValidationError")
    assert listed["omnistory_good"]["error"] is None
    assert listed["omnistory_good"]["registers"] == {
        "config": [(site / "omnistory_good/conf").as_uri()]
    }
    assert "template" in listed["builtin"]["registers"]["planner"]

    run = run_cli(
        "system=good_preset", "dataset.limit=1", "output_root=out", QUIET, cwd=tmp_path, env=env
    )
    assert run.returncode == 0, run.stderr
    # once per process, not once per config lookup
    assert sum("omnistory-typo" in line for line in _warnings(run.stderr)) == 1
    manifest = load_json(tmp_path / "out/runs/demo/good_preset/manifest.json")
    assert manifest["plugins"]["omnistory_typo"]["error"].startswith("PluginValidationError")
    assert manifest["missing"] == {"text": 0, "image": 0, "speech": 0}


def test_strict_plugins_still_raise_the_validation_error(site: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(site), "OMNISTORY_STRICT_PLUGINS": "1"}
    proc = run_cli("plugins", cwd=tmp_path, env=env)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "PluginValidationError" in proc.stderr


def test_preset_of_a_broken_plugin_names_it(site: Path, tmp_path: Path) -> None:
    # the preset composes as a stand-in (omnistory_core.unavailable): one line, exit 2
    env = {"PYTHONPATH": str(site)}
    proc = run_cli("system=fancy_preset", "output_root=out", QUIET, cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("omnistory: error:")]
    assert "'system/fancy_preset' is shipped by plugin 'omnistory_presets'" in line
    assert "(omnistory-presets 2.0.0)" in line and "a_module_that_does_not_exist" in line
    assert "python -m omnistory_core plugins" in line
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "store").exists()  # nothing generated


def test_sweep_over_a_broken_plugins_preset_names_it(site: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(site)}
    proc = run_cli(
        "-m", "system=good_preset,fancy_preset", "output_root=out", QUIET, cwd=tmp_path, env=env
    )
    assert proc.returncode != 0
    assert "is shipped by plugin 'omnistory_presets'" in proc.stderr


def test_unknown_preset_lists_the_plugins_that_failed(site: Path, tmp_path: Path) -> None:
    proc = run_cli("suite=nowhere", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert proc.returncode != 0
    (hint,) = [line for line in proc.stderr.splitlines() if "may provide" in line]
    assert "'suite/nowhere'" in hint
    for plugin in ("omnistory_presets", "omnistory_typo", "omnistory_badargs"):
        assert plugin in hint
    assert "omnistory_good" not in hint


def test_no_hint_when_every_plugin_loaded(tmp_path: Path) -> None:
    proc = run_cli("system=nowhere", cwd=tmp_path, env={"OMNISTORY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert proc.returncode != 0
    assert "Could not find 'system/nowhere'" in proc.stderr
    assert "failed to load" not in proc.stderr
