"""Stage-major jobs: plan failures become per-modality failures, experts see only what they read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omnistory_core.builtin.images import CopyImage, NoopImage
from omnistory_core.builtin.noop_tts import NoopTTS
from omnistory_core.components import ImageExpert, Planner, PlannerResponse
from omnistory_core.data import load_demo
from omnistory_core.engine.job import build_component, run_job
from omnistory_core.engine.outputs import materialize
from omnistory_core.engine.store import Store
from omnistory_core.errors import ConfigError
from omnistory_core.plugins import load_plugins

VALID = {
    "narration": "Pip ran home.",
    "image_prompt": "a fox running",
    "speech": {
        "speaker": "Pip",
        "utterance": "Wait for me!",
        "emotion": "happy",
        "speed": "fast",
        "pitch": "high",
        "gender": "male",
    },
}


class Flaky(Planner):
    """Valid plans except for example 1 (prose, no JSON) and 2 ("furious")."""

    name = "flaky-test"
    reads = ("current_text", "metadata")

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        index = int(item["metadata"]["_test_index"])
        if index == 1:
            return PlannerResponse("I cannot help with that.")
        plan = json.loads(json.dumps(VALID))
        if index == 2:
            plan["speech"]["emotion"] = "furious"
        return PlannerResponse("```json\n" + json.dumps(plan) + "\n```")


class Spy(ImageExpert):
    name = "spy-test"
    reads = ("image_prompt",)
    seen: list[dict[str, Any]] = []

    def run_one(self, item: dict[str, Any]):
        type(self).seen.append(dict(item))
        return NoopImage().run_one(item)


@pytest.fixture
def examples():
    out = load_demo(limit=4)
    for ex in out:  # let the test planner know which example it is looking at
        ex.metadata["_test_index"] = ex.index
    return out


def test_plan_failures_are_per_modality_data(examples, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    comps = {"planner": Flaky(seed=0), "image": Spy(seed=0), "tts": NoopTTS(seed=0)}
    result = run_job(examples=examples, components=comps, store=store)
    assert result.plans[0].plan is not None and result.plans[0].repairs == ["strip_code_fence"]
    assert result.plans[1].failure.category == "plan_json_error"
    assert result.plans[2].failure.category == "plan_invalid_label"
    # experts were not called for failed plans, and saw only the input they declared
    assert len(Spy.seen) == 1 and set(Spy.seen[0]) == {"image_prompt"}
    planner_stats, image_stats = result.stats["planner/flaky-test"], result.stats["image/spy-test"]
    assert (planner_stats.calls, planner_stats.failures) == (4, 2)
    # examples 0 and 3 have the same prompt: one call, one cache hit
    assert (image_stats.calls, image_stats.cache_hits) == (1, 1)

    job = tmp_path / "job"
    missing = materialize(job, result, store)
    assert missing == {"text": 2, "image": 2, "speech": 2}
    lines = (job / "missing.txt").read_text().splitlines()
    assert sorted(line.split("\t")[:3] for line in lines) == sorted(
        [["1", m, "plan_json_error"] for m in ("text", "image", "speech")]
        + [["2", m, "plan_invalid_label"] for m in ("text", "image", "speech")]
    )
    assert not (job / "image/1").exists() and (job / "image/0/generated.png").exists()
    records = [json.loads(r) for r in (job / "records.jsonl").read_text().splitlines()]
    assert records[2]["speech"]["category"] == "plan_invalid_label"
    assert "furious" in records[2]["speech"]["message"]
    plans = [json.loads(r) for r in (job / "plans.jsonl").read_text().splitlines()]
    assert plans[1]["raw"] == "I cannot help with that." and plans[1]["plan"] is None


def test_expert_ignoring_the_plan_runs_even_when_the_plan_failed(examples, tmp_path) -> None:
    comps = {"planner": Flaky(seed=0), "image": CopyImage(seed=0), "tts": NoopTTS(seed=0)}
    result = run_job(examples=examples, components=comps, store=Store(tmp_path / "s"))
    assert result.media["image"][1].status == "ok"  # copy reads only current_image
    assert result.media["speech"][1].category == "plan_json_error"


def test_oracle_needs_the_flag_and_reference_reads_need_oracle() -> None:
    registry = load_plugins()
    with pytest.raises(ConfigError, match="allow_oracle=true"):
        build_component(registry, "image", {"name": "oracle"}, seed=0, allow_oracle=False)
    oracle = build_component(registry, "image", {"name": "oracle"}, seed=0, allow_oracle=True)
    assert oracle.oracle

    class Sneaky(ImageExpert):
        name = "sneaky-test"
        reads = ("image_prompt", "reference_image")

    registry.components[("image", "sneaky-test")] = Sneaky
    try:
        with pytest.raises(ConfigError, match="not declared oracle"):
            build_component(registry, "image", {"name": "sneaky-test"}, seed=0, allow_oracle=True)
    finally:
        del registry.components[("image", "sneaky-test")]


def test_input_view_has_no_reference(examples) -> None:
    view = examples[0].input_view()
    assert not hasattr(view, "reference")
    assert view.current == examples[0].current
