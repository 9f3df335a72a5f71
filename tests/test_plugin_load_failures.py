"""A plugin that fails to load fails only the jobs that need it, through the real CLI.

The plugins are real installed distributions on PYTHONPATH (``.dist-info`` next to the modules,
as pip writes them): one whose hook module misspells a hook (``register_tts_expert``: pluggy
refuses the whole plugin, its config folder is never registered) and ships ``tts/fancy.yaml`` and
a preset; one that cannot be imported and declares a backbone without any yaml.  Their configs
compose as stand-ins (``omnistory_core.unavailable``), so Hydra does not stop the sweep: the jobs
that use them write ``job_error.json`` naming the plugin and why, the others finish.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omnistory_testing import load_json, run_cli
from test_plugin_isolation import _install

QUIET = ("engine.progress=false", "dataset.limit=1", "output_root=out", "evaluation.report=false")
FANCY = "'omnistory_fancy' (omnistory-fancy 0.1.0)"
MISSPELT = "unknown hook 'register_tts_expert' (did you mean 'register_tts_experts'?)"
VALIDATION = f"PluginValidationError: {MISSPELT}"
CORE = {"OMNISTORY_DISABLE_PLUGIN_AUTOLOAD": "1"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    _install(
        site,
        "omnistory-fancy",
        "0.1.0",
        "omnistory_fancy",
        {
            "omnistory_fancy/__init__.py": """
                from omnistory_core.hookspecs import hookimpl

                @hookimpl
                def register_tts_expert(register):
                    raise AssertionError("a misspelt hook is never called")

                @hookimpl
                def register_config_paths(register):
                    register("pkg://omnistory_fancy.conf")
            """,
            "omnistory_fancy/conf/__init__.py": "",
            "omnistory_fancy/conf/tts/fancy.yaml": "name: fancy\nvoice: bright\n",
            "omnistory_fancy/conf/system/fancy_preset.yaml": (
                "# @package _global_\ndefaults:\n  - override /tts: fancy\n"
                "system_id: fancy_preset\n"
            ),
        },
    )
    _install(
        site,
        "omnistory-broken",
        "0.2.0",
        "omnistory_broken",
        {"omnistory_broken/__init__.py": "import a_module_that_does_not_exist\n"},
    )
    return site


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("omnistory: error:")]


def test_plugins_shows_why_each_failed(site: Path, tmp_path: Path) -> None:
    proc = run_cli("plugins", "--json", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    listed = {p["plugin"]: p for p in json.loads(proc.stdout)}
    assert listed["omnistory_fancy"]["error"] == VALIDATION
    assert listed["omnistory_broken"]["error"].startswith("ModuleNotFoundError")
    assert "a_module_that_does_not_exist" in listed["omnistory_broken"]["error"]
    assert listed["builtin"]["error"] is None
    text = run_cli("plugins", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert text.returncode == 0, text.stderr
    (line,) = [x for x in text.stdout.splitlines() if x.startswith("load error: omnistory_fancy")]
    assert (
        line
        == f"load error: omnistory_fancy (omnistory-fancy 0.1.0): PluginValidationError: {MISSPELT}"
    )


def test_a_single_run_that_needs_it_is_one_line_and_exit_2(site: Path, tmp_path: Path) -> None:
    proc = run_cli("tts=fancy", *QUIET, cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = error_lines(proc.stderr)
    assert f"'tts/fancy' is shipped by plugin {FANCY}, which failed to load:" in line
    assert MISSPELT in line and "python -m omnistory_core plugins" in line
    assert "Traceback" not in proc.stderr and "Could not find" not in proc.stderr
    assert not (tmp_path / "out" / "store").exists()


def test_a_sweep_fails_only_the_jobs_that_need_it(site: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(site)}
    proc = run_cli("-m", "tts=fancy,espeak", *QUIET, cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    sweep = tmp_path / "out/sweeps/demo"
    error = load_json(sweep / "template-copy-fancy/job_error.json")
    assert error["error"].startswith("PluginError: 'tts/fancy' is shipped by plugin")
    assert FANCY in error["error"] and MISSPELT in error["error"]
    # the built-in system of the same sweep finished
    manifest = load_json(sweep / "template-copy-espeak/manifest.json")
    assert manifest["missing"] == {"text": 0, "image": 0, "speech": 0}
    assert manifest["plugins"]["omnistory_fancy"]["error"].startswith("PluginValidationError")


def test_a_preset_of_it_in_a_sweep_fails_only_its_job(site: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(site)}
    proc = run_cli("-m", "system=fancy_preset,template_copy_espeak", *QUIET, cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    sweep = tmp_path / "out/sweeps/demo"
    error = load_json(sweep / "fancy_preset/job_error.json")
    assert f"'system/fancy_preset' is shipped by plugin {FANCY}" in error["error"]
    assert (sweep / "template_copy_espeak/manifest.json").is_file()


def test_a_component_no_loaded_plugin_has_names_the_failed_ones(site: Path, tmp_path: Path) -> None:
    # a declared component needs no yaml: any plugin that failed to load may be the one
    proc = run_cli("backbone=broken_omni", *QUIET, cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = error_lines(proc.stderr)
    assert "plugins that failed to load, which may provide 'backbone/broken_omni':" in line
    assert "'omnistory_broken' (omnistory-broken 0.2.0)" in line and FANCY in line


def test_help_does_not_offer_what_cannot_run(site: Path, tmp_path: Path) -> None:
    proc = run_cli("--help", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    (tts,) = [line for line in proc.stdout.splitlines() if line.startswith("tts: ")]
    assert "espeak" in tts and "fancy" not in tts


def test_without_a_failed_plugin_a_missing_config_is_hydras_error(tmp_path: Path) -> None:
    proc = run_cli(
        "tts=fancy", *QUIET, cwd=tmp_path, env={"OMNISTORY_DISABLE_PLUGIN_AUTOLOAD": "1"}
    )
    assert proc.returncode == 1
    assert "Could not find 'tts/fancy'" in proc.stderr and "failed to load" not in proc.stderr
