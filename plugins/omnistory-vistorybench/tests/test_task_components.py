"""Every first-party ViStoryBench component keeps the component contract on its task:
``check_component`` runs it on the bundled fixture through ViStoryBench's own job (a generation
component) or scores the task's stand-in jobs through its evaluation (a metric), with offline
weights.  The components that need a model's tiny checkpoint are checked beside their other
tests (:data:`CHECKED_ELSEWHERE`); a completeness test keeps the list whole."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from omnistory_testkit import LocalChatServer, Reply, check_component, installed_registry
from omnistory_vistorybench.offline import JUDGE_ANSWER, METRICS, offline_metric_params

TASK = "vistorybench"

#: where each ViStoryBench component that needs a tiny model is checked on its task
CHECKED_ELSEWHERE: dict[tuple[str, str], str] = {
    ("image", "first_ref"): "omnistory-vistorybench/tests/test_systems.py",
    ("image", "sequential"): "omnistory-vistorybench/tests/test_systems.py",
    ("image", "uno_refs"): "omnistory-uno/tests/test_uno.py",
    ("image", "omnigen2_refs"): "omnistory-omnigen2/tests/test_omnigen2.py",
    ("image", "qwen_edit_story"): "omnistory-qwen-edit/tests/test_qwen_edit.py",
    ("image", "storyadapter"): "omnistory-storyadapter/tests/test_storyadapter.py",
    ("image", "storydiffusion"): "omnistory-storydiffusion/tests/test_storydiffusion_attention.py",
    ("image", "characonsist"): "omnistory-characonsist/tests/test_characonsist.py",
}
CHECKED_HERE: set[tuple[str, str]] = {
    ("image", "copy_paste"),
    ("metric", "prompt_align_standin"),
    *(("metric", m) for m in METRICS),
}
PLUGINS = Path(__file__).resolve().parents[2]


def _vistorybench_components() -> set[tuple[str, str]]:
    """The installed first-party components that are ViStoryBench's: those declaring the task,
    those whose ``reads`` only the task offers, and the task's evaluators."""
    registry = installed_registry()
    task, default = registry.task(TASK), registry.task("omnistorybench")
    found = {("metric", name) for name in task.evaluators if name in registry.names("metric")}
    for kind in ("planner", "backbone", "image", "tts", "metric", "judge"):
        for name in registry.names(kind):
            cls = registry.component(kind, name)
            if not str(cls.__module__).startswith("omnistory_"):
                continue  # a third party's
            reads = set(cls.reads)
            theirs = reads <= set(task.readable(kind, oracle=True))
            ours = reads <= set(default.readable(kind, oracle=True))
            if getattr(cls, "task", None) == TASK or (theirs and not ours):
                found.add((kind, name))
    return found


def test_every_vistorybench_component_is_checked_on_its_task() -> None:
    found = _vistorybench_components()
    checked = CHECKED_HERE | set(CHECKED_ELSEWHERE)
    assert found - checked == set(), f"ViStoryBench components not checked: {found - checked}"
    for (kind, name), where in CHECKED_ELSEWHERE.items():
        text = (PLUGINS / where).read_text(encoding="utf-8")
        assert 'task="vistorybench"' in text or "cls.task ==" in text, (kind, name, where)


def test_copy_paste_keeps_the_contract_on_its_task() -> None:
    from omnistory_vistorybench.experts import CopyPasteImage

    report = check_component(CopyPasteImage)  # its declared task
    assert report.task == TASK
    assert {"reads", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert report.calls["first run"] > 0 and report.calls["second run, same store"] == 0


def test_the_offline_prompt_align_stand_in_keeps_the_contract_on_the_task() -> None:
    from omnistory_vistorybench.demo import PromptAlignStandIn

    report = check_component(PromptAlignStandIn, task=TASK)
    assert report.task == TASK
    assert any(p.startswith("unreadable_input") for p in report.passed), str(report)


@pytest.fixture(scope="module")
def metric_params(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("metric-weights")
    with LocalChatServer(lambda body: Reply(text=JUDGE_ANSWER)) as server:
        params = offline_metric_params(root, METRICS, judge_url=server.openai_base_url)
        # rubric_dir is runtime (its files' contents are keyed): another folder, same files
        copy = root / "rubrics-copy"
        shutil.copytree(params["prompt_align"]["rubric_dir"], copy)
        yield params, {"rubric_dir": str(copy)}


@pytest.mark.parametrize("name", METRICS)
def test_each_metric_keeps_the_contract_on_its_task(name: str, metric_params) -> None:
    params, vary = metric_params
    cls = installed_registry().component("metric", name)
    report = check_component(
        cls, vary=vary if "rubric_dir" in params[name] else None, **params[name]
    )
    assert report.task == TASK
    assert {"reads", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("failures") for p in report.passed), str(report)


def test_the_test_kits_engine_helpers_take_the_task(tmp_path: Path) -> None:
    """Items, call keys and a run through a store, on ViStoryBench's fixture as its job does."""
    from omnistory_testkit import demo_items, fixture_call_keys, fixture_items, open_store, run_job
    from omnistory_vistorybench.experts import CopyPasteImage

    items = fixture_items(TASK, kind="image", per_group=2)
    assert len(items) == 4 and all("shot_prompt" in item for item in items.values())
    assert demo_items(2, task=TASK, kind="image") == list(items.values())
    keys = fixture_call_keys(CopyPasteImage, TASK, per_group=2, size=64)
    assert set(keys) == set(items)
    assert fixture_call_keys(CopyPasteImage, TASK, per_group=2, size=32) != keys

    store = open_store(tmp_path / "store")
    components = {"image": (CopyPasteImage, {"size": 64})}
    first = run_job(task=TASK, components=components, store=store, per_group=2)
    assert first.keys == keys  # the predicted keys are the run's
    assert all(r.status == "ok" for r in first.records.values()), first.records
    assert first.stats.calls == len(set(keys.values()))
    again = run_job(task=TASK, components=components, store=store, per_group=2)
    assert again.stats.calls == 0 and again.keys == keys
