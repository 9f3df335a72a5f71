"""``python -m omnistory_core --help`` lists every component group with its options, the built-in
ones and the installed plugins' (backbones included, even with no plugin installed), and a group
with no option at all as "none installed" (metrics and judges with the core alone); ``plugins``
lists every group's installed names the same way."""

from __future__ import annotations

from pathlib import Path

import yaml
from omnistory_testkit import run_cli

from omnistory_core.builtin.noop_backbone import NoopBackbone
from omnistory_core.params import config_node

CONF = Path(__file__).resolve().parents[1] / "omnistory_core" / "conf"
GROUPS = ("planner", "backbone", "image", "tts", "dataset", "task", "metric", "judge")
#: what ``plugins`` lists, in this order
PLUGIN_GROUPS = ("task", "planner", "backbone", "image", "tts", "metric", "judge")


def _groups(help_text: str) -> dict[str, list[str]]:
    """The "Configuration groups" section: group -> its options."""
    section = help_text.split("== Configuration groups ==", 1)[1].split("== Config ==", 1)[0]
    out = {}
    for line in section.splitlines():
        group, sep, options = line.partition(": ")
        if sep and " " not in group:
            out[group] = [o.strip() for o in options.split(",")]
    return out


def test_help_lists_every_group_with_builtin_and_plugin_options(tmp_path: Path) -> None:
    proc = run_cli("--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    groups = _groups(proc.stdout)
    assert set(GROUPS) <= set(groups), sorted(groups)
    assert {"noop", "example_omni", "example_ti", "example_ts"} <= set(groups["backbone"])
    assert {"template", "copy", "noop"} <= set(groups["planner"])
    assert {"copy", "noop"} <= set(groups["image"]) and {"espeak", "noop"} <= set(groups["tts"])
    assert "demo" in groups["dataset"] and "omnistorybench" in groups["task"]
    assert {"bertscore", "clip"} <= set(groups["metric"]) and "all" in groups["judge"]


def test_the_core_alone_lists_its_backbone(tmp_path: Path) -> None:
    # no plugin ships a backbone yaml here: the core's conf/backbone/ makes the group exist
    proc = run_cli("--help", cwd=tmp_path, env={"OMNISTORY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert proc.returncode == 0, proc.stderr
    groups = _groups(proc.stdout)
    assert set(GROUPS) <= set(groups), sorted(groups)
    assert groups["backbone"] == ["noop"]
    assert "example_omni" not in proc.stdout
    # no evaluator without the evaluation distribution: said, not left out
    assert (
        groups["metric"] == groups["judge"] == ["none installed (python -m omnistory_core plugins)"]
    )


def _plugin_groups(stdout: str) -> dict[str, list[str]]:
    section = stdout.split("Installed, by group", 1)[1].splitlines()[1:]
    out = {}
    for line in section:
        if not line.startswith("  "):
            break
        group, _, names = line.strip().partition(": ")
        out[group] = [n.strip() for n in names.split(",")]
    return out


def test_plugins_lists_every_group(tmp_path: Path) -> None:
    proc = run_cli("plugins", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    groups = _plugin_groups(proc.stdout)
    assert tuple(groups) == PLUGIN_GROUPS
    assert {"omnistorybench", "vistorybench"} <= set(groups["task"])
    assert {"template", "noop"} <= set(groups["planner"]) and "mmada" in groups["backbone"]
    assert {"copy", "noop"} <= set(groups["image"]) and "espeak" in groups["tts"]
    assert "bertscore" in groups["metric"] and groups["judge"] != ["none installed"]


def test_plugins_with_the_core_alone_says_none_installed(tmp_path: Path) -> None:
    proc = run_cli("plugins", cwd=tmp_path, env={"OMNISTORY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert proc.returncode == 0, proc.stderr
    groups = _plugin_groups(proc.stdout)
    assert tuple(groups) == PLUGIN_GROUPS
    assert groups["task"] == ["omnistorybench"] and groups["backbone"] == ["noop"]
    assert groups["metric"] == groups["judge"] == ["none installed"]


def test_the_noop_yaml_is_the_declared_node() -> None:
    # the core's yaml replaces the declared node instead of being laid over it: keep them equal
    written = yaml.safe_load((CONF / "backbone" / "noop.yaml").read_text())
    assert written == config_node(NoopBackbone)


def test_a_declared_noop_parameter_is_set_without_a_plus(tmp_path: Path) -> None:
    proc = run_cli(
        "backbone=noop", "backbone.delay_s=0.01", "dataset.limit=1", "output_root=out",
        "engine.progress=false", "engine.fail_on_missing=true", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out/runs/demo/noop/manifest.json").is_file()
