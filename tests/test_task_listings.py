"""CONTRIBUTING's promises about the CLI's listings, held for the second task: ``tasks`` names
each task's datasets with its fixture, and ``plugins --params`` shows a wrapper's inner expert's
parameters (ViStoryBench's ``image=sequential`` around Kontext)."""

from __future__ import annotations

import json

import pytest

from omnistory_core.cli_plugins import tasks_main
from omnistory_core.plugins import load_plugins


def test_tasks_lists_each_tasks_datasets_with_its_fixture(capsys: pytest.CaptureFixture) -> None:
    assert tasks_main(["--json"]) == 0
    described = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert described["vistorybench"]["fixture"] == "vistory_fixture"
    assert {"vistory", "vistory_fixture"} <= set(described["vistorybench"]["datasets"])
    assert described["omnistorybench"]["fixture"] in described["omnistorybench"]["datasets"]
    assert tasks_main([]) == 0
    assert "vistory_fixture" in capsys.readouterr().out


def test_plugins_params_shows_a_wrappers_inner_parameters() -> None:
    from omnistory_core.cli_params import component_params

    registry = load_plugins()
    rows = component_params(registry, "image", "sequential")
    assert rows is not None
    own = [r["name"] for r in rows if not r.get("via")]
    inner = [r for r in rows if r.get("via")]
    assert "inner" in own
    assert inner and {r["via"] for r in inner} == {"inner=kontext"}
    kontext = {p.name for p in registry.component("image", "kontext").parameters}
    kontext |= {"seed", "batch_size"}  # every component's
    assert {r["name"] for r in inner} <= kontext and "steps" in {r["name"] for r in inner}
