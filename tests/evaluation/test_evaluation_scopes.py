"""The evaluation runner over a task's own units: each evaluator scores the units of its scope
through the store, with the statuses and call keys of Omni-StoryBench's pools.

The units are built here as a task's ``evaluation`` returns them; the evaluators are small
counting metrics, so what the runner calls (and does not call) is visible.  The ViStoryBench
task runs the same code through the command line in its plugin's tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from omnistory_eval.runner import PoolUnit, evaluate_task, score_units, unprovided_inputs

from omnistory_core.api import EvalResult, Metric
from omnistory_core.engine.store import Store


class ShotCount(Metric):
    """group scope: how many shots of a story have an image; ``error`` for a story named
    ``unreachable`` (an evaluator that could not answer)."""

    name = "shot_count"
    version = "1"
    track = "style"
    criteria = ("n",)
    scope = "group"
    reads = ("candidate_shots",)
    calls: ClassVar[list[Any]] = []

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        out = []
        for item in items:
            type(self).calls.append(item)
            shots = item["candidate_shots"]
            if "unreachable" in shots:
                out.append(EvalResult({"n": None}, status="error", detail={"error": "down"}))
            else:
                out.append(EvalResult({"n": float(sum(v is not None for v in shots.values()))}))
        return out


class RunSize(Metric):
    """run scope: the number of images of a system."""

    name = "run_size"
    version = "1"
    track = "diversity"
    criteria = ("images",)
    scope = "run"
    reads = ("candidate_images",)
    calls: ClassVar[list[Any]] = []

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        type(self).calls.extend(items)
        return [EvalResult({"images": float(len(i["candidate_images"]))}) for i in items]


class Caption(Metric):
    """item scope, reading an input the units above do not have."""

    name = "caption"
    version = "1"
    track = "style"
    criteria = ("c",)
    reads = ("candidate_image", "reference_text")

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        raise AssertionError("never called")


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    ShotCount.calls.clear()
    RunSize.calls.clear()


def units() -> dict[str, list[PoolUnit]]:
    """Two systems: ``a`` with stories 01 (two shots) and 02 (none), ``b`` with 01 (the same
    shots as ``a``) and a story whose evaluator is down."""
    shots = {1: "img-1", 2: "img-2"}
    group = [
        PoolUnit("a", "01", {"candidate_shots": shots}),
        PoolUnit("a", "02", {"candidate_shots": {1: None}}, frozenset({"candidate_shots"})),
        PoolUnit("b", "01", {"candidate_shots": dict(shots)}),
        PoolUnit("b", "03", {"candidate_shots": {"unreachable": None}}),
    ]
    run = [
        PoolUnit("a", "", {"candidate_images": ["img-1", "img-2"]}),
        PoolUnit("b", "", {"candidate_images": []}, frozenset({"candidate_images"})),
    ]
    return {"item": [], "group": group, "run": run}


def test_units_are_scored_per_scope_and_a_rerun_makes_only_the_errors_again(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store")
    evaluators = [ShotCount(), RunSize()]
    result = evaluate_task({"units": units()}, evaluators, store)
    rows = {(r.evaluator, r.system, r.example_id): r for r in result.rows}
    assert {k: (r.scope, r.status, r.score) for k, r in rows.items()} == {
        ("shot_count", "a", "01"): ("group", "ok", 2.0),
        ("shot_count", "a", "02"): ("group", "missing_output", None),
        ("shot_count", "b", "01"): ("group", "ok", 2.0),
        ("shot_count", "b", "03"): ("group", "error", None),
        ("run_size", "a", ""): ("run", "ok", 2.0),
        ("run_size", "b", ""): ("run", "missing_output", None),
    }
    assert rows[("shot_count", "b", "03")].cause == "down"
    # a's and b's story 01 are one call (same inputs); no call for a missing output
    assert len(ShotCount.calls) == 2 and len(RunSize.calls) == 1
    assert result.items == {"metric/shot_count": 3, "metric/run_size": 1}
    assert [r.get("scope") for r in result.audit["metric/run_size"]] == ["run", "run"]
    assert result.rows[0].to_dict()["scope"] == "group"

    ShotCount.calls.clear()
    RunSize.calls.clear()
    again = score_units(units(), evaluators, store)
    # the error was not stored: only that story is asked again
    assert ShotCount.calls == [{"candidate_shots": {"unreachable": None}}]
    assert RunSize.calls == [] and again.stats["metric/run_size"].calls == 0
    assert [r.to_dict() for r in again.rows] == [r.to_dict() for r in result.rows]


def test_an_evaluator_reading_inputs_the_units_lack_is_found_before_scoring() -> None:
    assert unprovided_inputs(Caption(), units()) is None  # no item unit: nothing to lack
    with_items = {**units(), "item": [PoolUnit("a", "01_01", {"candidate_image": "img-1"})]}
    assert unprovided_inputs(Caption(), with_items) == ("item", ["reference_text"])
    assert unprovided_inputs(ShotCount(), {"item": []}) == ("group", ["candidate_shots"])
