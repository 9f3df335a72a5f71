"""Systems are the stages their components imply; incoherent ones are refused before any call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omnistory_testing import run_cli

from omnistory_core.components import Backbone
from omnistory_core.engine.system import derived_system_id, paradigm_of, resolve_system
from omnistory_core.errors import ConfigError
from omnistory_core.plugins import load_plugins

QUIET = "engine.progress=false"

BASE = {"output_root": "o", "dataset": {"name": "demo"}, "engine": {}, "evaluation": {}}
DEFAULTS = {
    "planner": {"name": "template", "default_choice": True},
    "image": {"name": "copy", "default_choice": True},
    "tts": {"name": "espeak", "default_choice": True},
}


def cfg(**groups) -> dict:
    out = {**BASE, **DEFAULTS}
    out.update(groups)
    return out


def test_paradigms_follow_what_the_backbone_produces() -> None:
    assert paradigm_of(None) == "orchestration"
    assert paradigm_of(frozenset({"text", "image"})) == "semi-orchestration (T+I)"
    assert paradigm_of(frozenset({"text", "speech"})) == "semi-orchestration (T+S)"
    assert paradigm_of(frozenset({"text", "image", "speech"})) == "any-to-any"
    assert paradigm_of(None, baseline=True) == "baseline"


@pytest.mark.parametrize(
    ("groups", "stages", "paradigm", "system_id"),
    [
        ({}, ("planner", "image", "tts"), "baseline", "template-copy-espeak"),
        (
            {"planner": {"name": "instruction"}},
            ("planner", "image", "tts"),
            "baseline",
            "instruction-copy-espeak",
        ),
        ({"backbone": {"name": "example_omni"}}, ("backbone",), "any-to-any", "example_omni"),
        ({"backbone": {"name": "noop"}}, ("backbone",), "baseline", "noop"),
        (
            {"backbone": {"name": "example_ti"}, "tts": {"name": "noop"}},
            ("backbone", "tts"),
            "semi-orchestration (T+I)",
            "example_ti-noop",
        ),
        (
            {"backbone": {"name": "example_ts"}, "image": {"name": "copy"}},
            ("backbone", "image"),
            "semi-orchestration (T+S)",
            "example_ts-copy",
        ),
    ],
)
def test_resolve_system(groups, stages, paradigm, system_id) -> None:
    config = cfg(**groups)
    plan = resolve_system(config, load_plugins())
    assert plan.groups == stages and plan.paradigm == paradigm
    assert derived_system_id(config) == system_id == plan.system_id


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        (
            {"backbone": {"name": "example_omni"}, "planner": {"name": "template"}},
            "planner=template and backbone=example_omni together",
        ),
        (
            {"backbone": {"name": "example_omni"}, "image": {"name": "copy"}},
            "image=copy with backbone=example_omni, which makes image natively",
        ),
        ({"backbone": {"name": "example_ti"}}, "backbone=example_ti does not make speech"),
        ({"tts": {"runner": {}}}, "nothing makes speech: choose tts=NAME"),
        ({"judge": {"name": "text-qwen3-30b-a3b"}}, "config key(s) judge are not used"),
        ({"paradigm": "any-to-any"}, "paradigm='any-to-any' does not match"),
        ({"backbone": {"name": "nonexistent"}}, "no backbone named 'nonexistent'"),
    ],
)
def test_incoherent_systems_are_refused(groups, message) -> None:
    with pytest.raises(Exception, match=None) as info:
        resolve_system(cfg(**groups), load_plugins())
    assert message in str(info.value)


def test_a_backbone_must_declare_what_it_produces() -> None:
    from omnistory_core.errors import PluginError
    from omnistory_core.hookspecs import hookimpl
    from omnistory_core.plugins import Registry, _make_manager, _register_plugin

    class Vague(Backbone):
        name = "vague-test"

    class Plugin:
        @staticmethod
        @hookimpl
        def register_backbones(register):
            register(Vague)

    registry = Registry()
    _register_plugin(_make_manager(), registry, "vague", lambda: Plugin, "d", "1", strict=False)
    assert ("backbone", "vague-test") not in registry.components
    assert "produces must be a non-empty frozenset" in registry.plugins["vague"].error
    with pytest.raises(PluginError, match="lacks 'text'"):
        Vague.produces = frozenset({"image"})
        _register_plugin(_make_manager(), Registry(), "v", lambda: Plugin, "d", "1", strict=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("planner=template", "backbone=example_omni"), "together"),
        (("backbone=example_omni", "image=copy"), "makes image natively"),
        (("backbone=example_ti",), "does not make speech and no tts expert was chosen"),
        (("~tts",), "nothing makes speech"),
        (("+judge=text-qwen3-30b-a3b",), "are not used by a generation run"),
        (("backbone=example_omni", "++tts.name=espeak"), "makes speech natively"),
    ],
)
def test_cli_refuses_with_one_line_and_exit_2(tmp_path: Path, args, message) -> None:
    proc = run_cli(*args, "dataset.limit=1", "output_root=out", QUIET, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not list((tmp_path / "out").glob("store/calls/*/*.json"))  # no model call was made


def test_incoherent_job_in_a_sweep_is_recorded_and_others_finish(tmp_path: Path) -> None:
    proc = run_cli(
        "-m",
        "backbone=example_omni,example_ti",
        "dataset.limit=1",
        "output_root=out",
        "sweep_name=s",
        QUIET,
        "evaluation.report=false",
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    sweep = tmp_path / "out" / "sweeps" / "s"
    assert (sweep / "example_omni" / "manifest.json").is_file()
    error = json.loads((sweep / "example_ti" / "job_error.json").read_text())
    assert "does not make speech" in error["error"]


def test_cfg_job_shows_the_backbone_group(tmp_path: Path) -> None:
    proc = run_cli("backbone=example_ti", "tts=espeak", "--cfg", "job", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "name: example_ti" in proc.stdout


def test_default_choices_never_hide_an_explicit_one() -> None:
    # the same planner named explicitly is an explicit choice: refused with a backbone
    config = cfg(backbone={"name": "example_omni"}, planner={"name": "template"})
    with pytest.raises(ConfigError, match="together"):
        resolve_system(config, load_plugins())


def test_the_builtin_backbone_runs_a_complete_system(tmp_path: Path) -> None:
    proc = run_cli("backbone=noop", "dataset.limit=2", "output_root=out", QUIET, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = tmp_path / "out" / "runs" / "demo" / "noop"
    assert (job / "missing.txt").read_text() == ""
    assert json.loads((job / "manifest.json").read_text())["stages"] == ["backbone"]


def test_env_create_plans_a_backbone_environment(tmp_path: Path) -> None:
    proc = run_cli("env", "create", "backbone=example_omni", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "venv .venvs/backbone-example_omni" in proc.stdout
    assert "pillow>=10" in proc.stdout and "omnistory-example-omni" in proc.stdout
    assert "--no-compile" not in proc.stdout
    fast = run_cli(
        "env", "create", "backbone=example_omni", "--dry-run", "--no-compile", cwd=tmp_path
    )
    assert fast.returncode == 0, fast.stderr
    pips = [line for line in fast.stdout.splitlines() if " -m pip install" in line]
    assert pips and all("pip install -q --no-compile " in line for line in pips), pips
