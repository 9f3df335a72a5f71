"""Failures that explain themselves: where the component broke, which failures are recomputed,
components that cannot run, the failure summary."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from omnistory_core.builtin.images import NoopImage
from omnistory_core.builtin.noop_tts import NoopTTS
from omnistory_core.components import ComponentError, Planner, PlannerResponse
from omnistory_core.contract import Failure
from omnistory_core.data import load_demo
from omnistory_core.engine.failures import (
    ComponentUnavailable,
    MissingOutputs,
    NothingProduced,
    check_missing,
    code_location,
    exception_failure,
    retry_mode,
)
from omnistory_core.engine.job import run_job
from omnistory_core.engine.outputs import failure_summary, materialize
from omnistory_core.engine.stage import ComponentStats, LazyComponent, StageItem, run_stage
from omnistory_core.engine.store import Store
from omnistory_core.errors import ConfigError

PACKAGE = "omnistory_failures_test_pkg"
COMPONENT = """
import numpy as np

from omnistory_core.components import Planner


class Parsing(Planner):
    name = "parsing-test"
    reads = ("current_text",)

    def run_one(self, item):
        return helper(item["current_text"].encode())


def helper(raw):
    return float(raw)  # HELPER LINE


class Deep(Planner):
    name = "deep-test"
    reads = ("current_text",)

    def run_one(self, item):
        return np.asarray(["x"], dtype=float)  # DEEP LINE
"""


@pytest.fixture
def plugin_package(tmp_path: Path, monkeypatch):
    """A plugin package outside the engine: ``<site>/<PACKAGE>/models/parsing.py``."""
    site = tmp_path / "site"
    (site / PACKAGE / "models").mkdir(parents=True)
    (site / PACKAGE / "__init__.py").write_text("")
    (site / PACKAGE / "models" / "__init__.py").write_text("")
    (site / PACKAGE / "models" / "parsing.py").write_text(textwrap.dedent(COMPONENT))
    monkeypatch.syspath_prepend(str(site))
    for name in [m for m in sys.modules if m.startswith(PACKAGE)]:
        monkeypatch.delitem(sys.modules, name)
    module = importlib.import_module(f"{PACKAGE}.models.parsing")
    lines = COMPONENT.splitlines()
    marks = {
        mark: next(n for n, line in enumerate(lines, 1) if mark in line)
        for mark in ("HELPER LINE", "DEEP LINE")
    }
    return module, marks


def test_exception_failure_names_type_message_and_the_components_own_frame(plugin_package):
    module, marks = plugin_package
    component = module.Parsing()
    with pytest.raises(ValueError) as info:
        component.run_one({"current_text": "I\x1e\xfb"})
    failure = exception_failure(info.value, module.Parsing)
    assert failure.category == "model_error" and failure.exception == "ValueError"
    assert failure.message.startswith("ValueError: could not convert string to float")
    # the innermost frame of the plugin's code: the helper, not run_one and not the engine
    assert failure.where == f"{PACKAGE}/models/parsing.py:{marks['HELPER LINE']}"
    assert failure.describe().endswith(f"(at {PACKAGE}/models/parsing.py:{marks['HELPER LINE']})")
    assert Failure.from_dict(failure.to_dict()) == failure


def test_a_library_frame_below_the_component_is_not_its_code(plugin_package):
    module, marks = plugin_package
    with pytest.raises(ValueError) as info:
        module.Deep().run_one({"current_text": "x"})
    assert code_location(info.value, module.Deep) == (
        f"{PACKAGE}/models/parsing.py:{marks['DEEP LINE']}"
    )


def test_through_the_stage_runner_the_record_keeps_the_location(plugin_package, tmp_path):
    module, marks = plugin_package
    store = Store(tmp_path / "store")
    out = run_stage(
        LazyComponent(module.Parsing(), ComponentStats()),
        [StageItem(0, {"current_text": "abc"})],
        store,
    )
    assert out[0].failure["exception"] == "ValueError"
    assert out[0].failure["where"] == f"{PACKAGE}/models/parsing.py:{marks['HELPER LINE']}"
    assert store.get(out[0].key).failure == out[0].failure


def test_engine_frames_are_never_the_location(tmp_path: Path) -> None:
    class ReturnsInt(Planner):
        name = "returns-int-test"
        reads = ("current_text",)

        def run_one(self, item: dict[str, Any]) -> Any:
            return 42  # the engine's check refuses it, in engine code

    out = run_stage(
        LazyComponent(ReturnsInt(), ComponentStats()),
        [StageItem(0, {"current_text": "x"})],
        Store(tmp_path / "store"),
    )
    failure = out[0].failure
    assert failure["category"] == "contract_error"
    assert failure["message"] == (
        "planner/returns-int-test returned int for its result, expected a PlannerResponse, str"
        " or Plan"
    )
    # the location is the method that returned it, never the engine's check
    line = ReturnsInt.run_one.__code__.co_firstlineno
    assert failure["where"] == f"{Path(__file__).name}:{line}"
    assert "traceback" not in failure  # the engine's frames say nothing about the bug


class Counting(Planner):
    """Category by input: a crash (model_error), a timeout, an unparseable plan, a refusal."""

    name = "counting-test"
    reads = ("current_text",)
    calls: list[str] = []

    def run_one(self, item: dict[str, Any]) -> Any:
        text = item["current_text"]
        type(self).calls.append(text)
        if text == "crash":
            raise RuntimeError("bug")
        if text == "slow":
            raise TimeoutError("took too long")
        if text == "refuse":
            raise ComponentError("refused", category="empty_output")
        return PlannerResponse(text)


@pytest.mark.parametrize(
    ("mode", "recomputed"),
    [
        ("errors", ["crash", "slow"]),
        ("all", ["crash", "slow", "refuse"]),
        ("none", []),
        (True, ["crash", "slow", "refuse"]),
        (False, []),
        ("true", ["crash", "slow", "refuse"]),
    ],
)
def test_retry_modes(tmp_path: Path, mode, recomputed) -> None:
    store = Store(tmp_path / "store")
    items = [
        StageItem(i, {"current_text": t}) for i, t in enumerate(["ok", "crash", "slow", "refuse"])
    ]
    run_stage(LazyComponent(Counting(), ComponentStats()), items, store)
    Counting.calls = []
    run_stage(LazyComponent(Counting(), ComponentStats()), items, store, retry_failures=mode)
    assert sorted(Counting.calls) == sorted(recomputed)


def test_unknown_retry_mode_is_one_line() -> None:
    with pytest.raises(
        ConfigError, match=r"engine.retry_failures must be one of errors, all, none"
    ):
        retry_mode("sometimes")


class Plans(Planner):
    """Unparseable prose for example 1, a valid plan otherwise."""

    name = "plans-test"
    reads = ("metadata",)
    calls: list[int] = []
    fixed = False

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        import json

        index = int(item["metadata"]["_test_index"])
        type(self).calls.append(index)
        if index == 1 and not type(self).fixed:
            return PlannerResponse("I cannot help with that.")
        plan = {
            "narration": f"Page {index}.",
            "image_prompt": "a fox",
            "speech": {
                "speaker": "Pip",
                "utterance": "Hi!",
                "emotion": "happy",
                "speed": "normal",
                "pitch": "normal",
                "gender": "male",
            },
        }
        return PlannerResponse(json.dumps(plan))


@pytest.fixture
def examples():
    out = load_demo(limit=3)
    for ex in out:
        ex.metadata["_test_index"] = ex.index
    return out


def system(planner: Planner) -> dict[str, Any]:
    return {"planner": planner, "image": NoopImage(seed=0), "tts": NoopTTS(seed=0)}


def test_an_unparseable_plan_stays_cached_unless_all(examples, tmp_path) -> None:
    store = Store(tmp_path / "store")
    Plans.calls, Plans.fixed = [], False
    first = run_job(examples=examples, components=system(Plans(seed=0)), store=store)
    assert first.plans[1].failure.category == "plan_json_error"
    Plans.calls, Plans.fixed = [], True
    again = run_job(examples=examples, components=system(Plans(seed=0)), store=store)
    assert Plans.calls == [] and again.plans[1].failure is not None  # deterministic: cached
    retried = run_job(
        examples=examples, components=system(Plans(seed=0)), store=store, retry_failures="all"
    )
    assert Plans.calls == [1] and retried.plans[1].plan is not None


class Keyless(Planner):
    """Needs an environment variable: its preflight says so before any call."""

    name = "keyless-test"
    reads = ("current_text",)
    calls = 0

    def preflight(self) -> None:
        import os

        if not os.environ.get("OMNI_KEYLESS_TEST_KEY"):
            raise ComponentError(
                "no API key: environment variable OMNI_KEYLESS_TEST_KEY is not set; export it"
            )

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        type(self).calls += 1
        return Plans().run_one({"metadata": {"_test_index": 0}})


def test_failed_preflight_stops_the_job_before_any_call_unless_all_is_cached(
    examples, tmp_path, monkeypatch
) -> None:
    store = Store(tmp_path / "store")
    monkeypatch.delenv("OMNI_KEYLESS_TEST_KEY", raising=False)
    Keyless.calls = 0
    with pytest.raises(ComponentUnavailable) as info:
        run_job(examples=examples, components=system(Keyless(seed=0)), store=store)
    message = str(info.value)
    assert message.startswith("planner=keyless-test cannot run: no API key")
    assert "OMNI_KEYLESS_TEST_KEY" in message and "\n" not in message
    assert Keyless.calls == 0 and not list((tmp_path / "store" / "calls").rglob("*.json"))

    monkeypatch.setenv("OMNI_KEYLESS_TEST_KEY", "k")
    run_job(examples=examples, components=system(Keyless(seed=0)), store=store)
    assert Keyless.calls == 3
    # every output is in the store: a re-run needs no key
    monkeypatch.delenv("OMNI_KEYLESS_TEST_KEY")
    cached = run_job(examples=examples, components=system(Keyless(seed=0)), store=store)
    assert Keyless.calls == 3 and all(isinstance(t, str) for t in cached.text.values())


class NoWeights(NoopTTS):
    name = "noweights-test"

    def load(self) -> None:
        open("/nonexistent/omnistory/weights.bin", "rb")  # noqa: SIM115 - the failure under test


def test_a_component_that_cannot_load_fails_its_job_with_one_line(examples, tmp_path) -> None:
    store = Store(tmp_path / "store")
    comps = {"planner": Plans(seed=0), "image": NoopImage(seed=0), "tts": NoWeights(seed=0)}
    with pytest.raises(ComponentUnavailable) as info:
        run_job(examples=examples, components=comps, store=store)
    message = str(info.value)
    assert message.startswith("tts=noweights-test cannot run: FileNotFoundError:")
    assert "/nonexistent/omnistory/weights.bin" in message
    assert "test_failures.py:" in message  # where the component's load broke
    assert "weights are downloaded" in message  # the remedy


def test_failure_summary_groups_by_modality_and_category() -> None:
    crash = [
        Failure("model_error", f"ValueError: bad {i}", exception="ValueError", where="p/m.py:3")
        for i in range(3)
    ]
    lines = failure_summary(
        [("text", f) for f in crash]
        + [("speech", Failure("plan_json_error", "no JSON object")), ("speech", crash[0])],
        n_examples=4,
    )
    assert lines[0] == "failures: 5 of 12 outputs missing (text 3, image 0, speech 2)"
    assert lines[1].split()[:3] == ["text", "model_error", "3"]
    assert lines[1].endswith("ValueError: bad 0 (at p/m.py:3)")  # three messages, one cause
    assert {tuple(ln.split()[:3]) for ln in lines[2:]} == {
        ("speech", "plan_json_error", "1"),
        ("speech", "model_error", "1"),
    }
    assert failure_summary([], 2) == ["failures: none (6 of 6 outputs present)"]


def test_materialize_writes_the_location_to_missing_and_records(
    plugin_package, examples, tmp_path
) -> None:
    module, marks = plugin_package
    store = Store(tmp_path / "store")

    class Broken(module.Parsing):
        reads = ("current_text",)

    result = run_job(
        examples=examples,
        components={"planner": Broken(seed=0), "image": NoopImage(seed=0), "tts": NoopTTS(seed=0)},
        store=store,
    )
    job = tmp_path / "job"
    assert materialize(job, result, store) == {"text": 3, "image": 3, "speech": 3}
    where = f"{PACKAGE}/models/parsing.py:{marks['HELPER LINE']}"
    lines = (job / "missing.txt").read_text().splitlines()
    assert len(lines) == 9 and all(line.endswith(f"(at {where})") for line in lines)
    import json

    rows = [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines()]
    assert rows[0]["text"]["where"] == where and rows[0]["text"]["exception"] == "ValueError"
    stats = json.loads((job / "stats.json").read_text())
    assert stats["missing"]["text"] == {"model_error": 3}


def test_fail_on_missing() -> None:
    check_missing({"text": 0, "image": 0, "speech": 0}, True)
    check_missing({"text": 1, "image": 0, "speech": 0}, False)
    with pytest.raises(MissingOutputs, match=r"1 output\(s\) missing \(text 1, image 0"):
        check_missing({"text": 1, "image": 0, "speech": 0}, True)


def test_an_isolated_component_without_its_interpreter_stops_the_job(examples, tmp_path) -> None:
    from omnistory_core.engine.isolation import IsolatedComponent

    store = Store(tmp_path / "store")
    tts = IsolatedComponent(NoopTTS(seed=0), str(tmp_path / "no-venv/bin/python"), store.root)
    comps = {"planner": Plans(seed=0), "image": NoopImage(seed=0), "tts": tts}
    Plans.calls, Plans.fixed = [], True
    with pytest.raises(ComponentUnavailable) as info:
        run_job(examples=examples, components=comps, store=store)
    assert str(info.value).startswith("tts=noop cannot run: runner.python ")
    assert "python -m omnistory_core env create tts=noop" in str(info.value)  # the remedy
    assert Plans.calls == []  # checked before the first stage


def test_a_job_that_made_nothing_fails_whatever_the_setting() -> None:
    nothing = {"text": 2, "image": 2, "speech": 2}
    for setting in (False, True):
        with pytest.raises(NothingProduced, match=r"every output is missing \(text 2, image 2"):
            check_missing(nothing, setting, expected=6)
    check_missing({"text": 2, "image": 1, "speech": 2}, False, expected=6)  # one image: a result
    check_missing({"text": 0, "image": 0, "speech": 0}, False, expected=0)  # an empty dataset
