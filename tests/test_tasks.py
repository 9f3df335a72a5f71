"""The task seam: tasks are registered by plugins, listed by ``tasks``, selected by ``task=``,
and the scores table carries an evaluator's scope."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omnistory_testkit import run_cli

from omnistory_core.builtin.omnistorybench import CRITERIA, OMNISTORYBENCH
from omnistory_core.plugins import load_plugins
from omnistory_core.scores import ScoreRow, read_scores, write_scores
from omnistory_core.tasks import selected_task


def test_omnistorybench_is_registered_and_declares_its_scoring() -> None:
    registry = load_plugins()
    task = registry.task("omnistorybench")
    assert task is OMNISTORYBENCH and selected_task() is task
    assert task.track_names == ("text", "image", "speech", "omni")
    assert all(len(task.criteria(track)) == 4 for track in task.track_names)
    assert task.criteria("omni") == CRITERIA["omni"]
    assert [slot.name for slot in task.outputs] == ["text", "image", "speech"]
    assert {"current_image", "conditions", "image_prompt"} <= set(task.inputs)
    assert "reference_image" in task.reference_inputs
    with pytest.raises(KeyError, match="no track 'style'"):
        task.criteria("style")


def test_an_unknown_task_names_the_known_ones() -> None:
    with pytest.raises(Exception, match="no task named 'nope'.*omnistorybench"):
        load_plugins().task("nope")


def test_the_tasks_command_lists_and_describes_the_installed_tasks(tmp_path: Path) -> None:
    table = run_cli("tasks", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "omnistorybench" in table.stdout
    described = run_cli("tasks", "--json", cwd=tmp_path)
    assert described.returncode == 0, described.stderr
    [omni] = [t for t in json.loads(described.stdout) if t["name"] == "omnistorybench"]
    assert omni["tracks"]["text"] == list(CRITERIA["text"])
    assert omni["outputs"] == {"text": "text", "image": "image", "speech": "speech"}


def test_task_is_a_config_group_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    ok = run_cli("task=omnistorybench", "dataset.limit=1", "engine.progress=false", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr[-2000:]
    bad = run_cli("task=nope", "dataset.limit=1", cwd=tmp_path)
    assert bad.returncode != 0
    assert "task" in bad.stderr and "nope" in bad.stderr


def test_scope_round_trips_and_item_rows_keep_their_bytes(tmp_path: Path) -> None:
    item = ScoreRow("s", "ex1", "metric", "image", "clip", "cosine", 0.5, "ok")
    story = ScoreRow(
        "s", "01", "metric", "character", "cids", "cids_cross_mean", 0.3, "ok", scope="group"
    )
    run = ScoreRow("s", "", "metric", "diversity", "is", "inception_score", 9.0, "ok", scope="run")
    path = tmp_path / "scores.jsonl"
    write_scores(path, [item, story, run])
    lines = path.read_text().splitlines()
    assert "scope" not in json.loads(lines[0])  # as every item row before scopes existed
    assert json.loads(lines[1])["scope"] == "group" and json.loads(lines[2])["scope"] == "run"
    assert list(read_scores(path)) == [item, story, run]
    with pytest.raises(ValueError, match="scope must be one of"):
        ScoreRow("s", "x", "metric", "image", "clip", "cosine", 0.5, "ok", scope="book")
    with pytest.raises(ValueError, match="track"):
        ScoreRow("s", "x", "metric", "", "clip", "cosine", 0.5, "ok")


def test_a_components_unit_and_an_evaluators_scope_are_checked_where_declared() -> None:
    from omnistory_core.api import ImageExpert, Metric
    from omnistory_core.errors import ConfigError

    class Story(ImageExpert):
        name, unit = "story_ok", "group"

    assert Story.unit == "group"
    with pytest.raises(ConfigError, match=r"unit must be one of \('item', 'group'\)"):

        class Paged(ImageExpert):  # noqa: F841 - defining it is the test
            name, unit = "paged", "page"

    with pytest.raises(ConfigError, match="scope must be one of"):

        class Booked(Metric):  # noqa: F841
            name, track, criteria, scope = "booked", "image", ("x",), "book"
