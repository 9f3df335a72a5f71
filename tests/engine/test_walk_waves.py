"""An expert stage computed in waves (start sooner) makes exactly the calls of the full stage:
:meth:`JobWalk.wave` gives the examples whose plans exist the keys and inputs the stage-major
walk gives them once every plan exists, and :meth:`JobWalk.ready` holds back the examples of
a group-unit expert's groups that still miss a plan (a group call's key covers every member)."""

from __future__ import annotations

from pathlib import Path

from omnistory_testkit.engine import demo_examples

from omnistory_core.components import ImageExpert
from omnistory_core.engine.job import build_component, job_walk
from omnistory_core.engine.stage import ComponentStats, LazyComponent, run_stage
from omnistory_core.engine.store import Store
from omnistory_core.plugins import load_plugins


class BookImage(ImageExpert):
    """One call per book (a storyboard expert)."""

    name = "book-waves"
    version = "1"
    unit = "group"
    reads = ("image_prompt",)
    parameters = ()


def _components(group_image: bool) -> dict:
    registry = load_plugins()
    out = {
        "planner": build_component(
            registry, "planner", {"name": "template"}, seed=0, allow_oracle=False
        ),
        "tts": build_component(registry, "tts", {"name": "espeak"}, seed=0, allow_oracle=False),
    }
    out["image"] = (
        BookImage(seed=0)
        if group_image
        else build_component(registry, "image", {"name": "copy"}, seed=0, allow_oracle=False)
    )
    return out


def _full_stages(examples: list, components: dict, store: Store) -> tuple[dict, dict]:
    """The source stage's records and, per expert group, the calls of its full stage."""
    walk = job_walk(examples, components)
    stages = walk.stages()
    source = next(stages)
    records = run_stage(LazyComponent(source.component, ComponentStats()), source.items, store)
    calls = {}
    stage = stages.send(records)
    while True:
        calls[stage.group] = dict(stage.calls)
        try:
            stage = stages.send({i: None for i in range(len(examples))})
        except StopIteration:
            return records, calls


def test_waves_make_the_calls_of_the_full_stage(tmp_path: Path) -> None:
    examples = demo_examples(7)  # books: pages 0-3 of one, 4-6 of another
    for group_image in (False, True):
        components = _components(group_image)
        store = Store(tmp_path / f"store-{group_image}")
        records, full = _full_stages(examples, components, store)
        walk = job_walk(examples, components)  # a fresh walk: nothing derived yet
        planned = {i: records[i] for i in range(6)}  # the second book misses its last plan
        for group in ("image", "tts"):
            ready = walk.ready(group, planned)
            expected = [0, 1, 2, 3] if group == "image" and group_image else list(range(6))
            assert [ex.index for ex in ready] == expected, (group, group_image)
            wave = walk.wave(group, {ex.index: planned[ex.index] for ex in ready}, ready)
            assert dict(wave.calls) == {i: full[group][i] for i in expected}, (group, group_image)
            rest = [ex for ex in examples if ex.index not in expected]
            last = walk.wave(group, {ex.index: records[ex.index] for ex in rest}, rest)
            # the waves together: every call of the full stage, each once
            assert {**wave.calls, **last.calls} == full[group]


def test_a_failed_plan_blocks_its_expert_call_in_a_wave_as_in_the_full_stage(
    tmp_path: Path,
) -> None:
    """Failures are data in waves too: an example whose planner call failed gets, in its wave,
    the blocked item (with the plan's failure) the full stage gives it, and no call."""
    from omnistory_core.engine.store import CallRecord

    examples = demo_examples(4)
    components = _components(False)
    walk = job_walk(examples, components)
    source = walk.source_stage()
    records = run_stage(
        LazyComponent(source.component, ComponentStats()), source.items, Store(tmp_path / "store")
    )
    failed = CallRecord(
        key=records[1].key,
        component=records[1].component,
        status="failure",
        failure={"category": "timeout", "message": "the planner timed out"},
    )
    answers = {**records, 1: failed}
    full = job_walk(examples, components).stages()
    next(full)
    full.send(answers)  # the image stage (copy reads no plan field)
    full_tts = full.send({i: None for i in range(len(examples))})
    wave = walk.wave("tts", {i: answers[i] for i in (0, 1)}, examples[:2])
    assert 1 not in wave.calls and 1 not in full_tts.calls
    assert wave.calls[0] == full_tts.calls[0]
    blocked = {item.index: item.blocked_by for item in wave.items}
    assert blocked[0] is None and blocked[1] is not None
    assert blocked[1] == next(i.blocked_by for i in full_tts.items if i.index == 1)
    assert blocked[1].category == "timeout"
