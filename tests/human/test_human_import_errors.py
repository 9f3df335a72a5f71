"""Bad Label Studio exports through the CLI: exit 2, a message naming file, task and field, and
nothing written (the scores table byte-identical, no plan stored next to it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from human_helpers import Study, rating_result, synthetic_export
from omnistory_report.human.export import export_run
from omnistory_report.human.labelstudio import CONTROLS
from omnistory_testkit import run_cli


def _set_rating(tasks: list[dict[str, Any]], value: Any) -> str:
    tasks[3]["annotations"][1]["result"][2]["value"] = {"rating": value}
    return str(tasks[3]["id"])


def _unknown_item(tasks: list[dict[str, Any]]) -> str:
    tasks[5]["data"]["item_id"] = "item-not-in-the-plan"
    return str(tasks[5]["id"])


def _no_item(tasks: list[dict[str, Any]]) -> str:
    del tasks[2]["data"]["item_id"]
    return str(tasks[2]["id"])


def _unknown_control(tasks: list[dict[str, Any]]) -> str:
    tasks[1]["annotations"][0]["result"][0]["from_name"] = "overall"
    return str(tasks[1]["id"])


def _choice_not_number(tasks: list[dict[str, Any]]) -> str:
    tasks[0]["annotations"][0]["result"] = rating_result({c: 5 for c in CONTROLS}, "choices")
    tasks[0]["annotations"][0]["result"][3]["value"] = {"choices": ["great"]}
    return str(tasks[0]["id"])


def _twice(tasks: list[dict[str, Any]]) -> str:
    tasks[4]["annotations"].append(dict(tasks[4]["annotations"][0], id=999))
    return str(tasks[4]["id"])


CASES: list[tuple[str, Callable[[list[dict[str, Any]]], str], tuple[str, ...]]] = [
    ("rating 11", lambda t: _set_rating(t, 11), ("value.rating = 11", "outside", "1–10")),
    ("rating 0", lambda t: _set_rating(t, 0), ("value.rating = 0", "outside")),
    ("rating 6.5", lambda t: _set_rating(t, 6.5), ("value.rating = 6.5",)),
    ("rating text", lambda t: _set_rating(t, "7"), ("value.rating = '7'", "not a number")),
    ("unknown item", _unknown_item, ("unknown task", "data.item_id", "item-not-in-the-plan")),
    ("no item id", _no_item, ("data.item_id", "is missing")),
    ("unknown control", _unknown_control, ("from_name", "'overall'", "rubric controls")),
    ("choice text", _choice_not_number, ("value.choices[0]", "'great'")),
    ("rated twice", _twice, ("annotator:1 already rated this task",)),
]


@pytest.fixture
def project(study: Study) -> Path:
    out = study.root / "ls"
    export_run(study.run_dir, out, window=2, start=0)
    return out


def _assert_refused(study: Study, export: Path, plan: Path, *needles: str) -> str:
    before = study.scores.read_bytes()
    proc = run_cli(
        "human", "import", str(export), "--scores", str(study.scores), "--plan", str(plan),
        cwd=study.root,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(export) in proc.stderr or str(plan) in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert study.scores.read_bytes() == before
    assert not (study.scores.parent / "human_plan.json").exists()
    return proc.stderr


@pytest.mark.parametrize(("name", "spoil", "needles"), CASES, ids=[c[0] for c in CASES])
def test_bad_export_is_refused_naming_the_task_and_field(
    study: Study, project: Path, name: str, spoil, needles: tuple[str, ...]
) -> None:
    tasks = synthetic_export(project)
    task_id = spoil(tasks)
    export = study.root / "export.json"
    export.write_text(json.dumps(tasks))
    _assert_refused(study, export, project / "plan.json", f"task {task_id}", *needles)


def test_not_an_export_and_missing_plan_are_refused(study: Study, project: Path) -> None:
    export = study.root / "export.json"
    export.write_text(json.dumps({"tasks": []}))
    _assert_refused(study, export, project / "plan.json", "not a Label Studio JSON export")
    export.write_text("[{")
    _assert_refused(study, export, project / "plan.json", "not valid JSON")
    export.write_text("[]")
    _assert_refused(study, export, study.root / "nowhere.json", "plan not found")
