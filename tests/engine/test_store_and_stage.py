"""The store and the stage runner: caching, dedupe, failures as data, multi-process safety."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path
from typing import Any

import pytest

from omnistory_core.components import Audio, ComponentError, Planner, PlannerResponse, TTSExpert
from omnistory_core.contract import Failure
from omnistory_core.engine.hashing import call_key
from omnistory_core.engine.stage import ComponentStats, LazyComponent, StageItem, run_stage
from omnistory_core.engine.store import CallRecord, Store


class Echo(Planner):
    name = "echo-test"
    version = "1"
    reads = ("current_text",)
    runtime_params = ("delay_s",)
    default_batch_size = 4

    loads = 0

    def load(self) -> None:
        type(self).loads += 1

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        time.sleep(float(self.params.get("delay_s") or 0))
        if any(i["current_text"] == "explode-batch" for i in items) and len(items) > 1:
            raise RuntimeError("batch-level crash")
        out: list[Any] = []
        for item in items:
            text = item["current_text"]
            if text == "explode-batch":
                out.append(ValueError("bad item"))
            elif text == "timeout":
                out.append(TimeoutError("took too long"))
            elif text == "refuse":
                out.append(Failure("empty_output", "nothing"))
            else:
                out.append(PlannerResponse(text.upper(), usage={"tokens": len(text)}))
        return out


def _run(store: Store, texts: list[str], **params) -> tuple[dict, ComponentStats]:
    stats = ComponentStats()
    lazy = LazyComponent(Echo(**params), stats)
    items = [StageItem(i, {"current_text": t}) for i, t in enumerate(texts)]
    return run_stage(lazy, items, store), stats


def test_cache_hits_dedupe_and_failures(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    texts = ["a", "b", "a", "explode-batch", "timeout", "refuse"]
    results, stats = _run(store, texts)
    assert results[0].output == {"text": "A"} and results[2].key == results[0].key
    # "a" twice -> one call; the batch crash fell back to item-by-item calls
    assert stats.calls == 5 and stats.cache_hits == 1 and stats.loads == 1
    assert results[3].status == "failure" and results[3].failure["category"] == "model_error"
    assert "bad item" in results[3].failure["message"]
    assert results[4].failure["category"] == "timeout"
    assert results[5].failure == {"category": "empty_output", "message": "nothing"}
    assert stats.failures == 3
    assert results[1].usage == {"tokens": 1}

    again, stats2 = _run(store, texts)
    assert stats2.calls == 0 and stats2.loads == 0 and stats2.cache_hits == 6
    assert {i: r.to_dict() for i, r in again.items()} == {
        i: r.to_dict() for i, r in results.items()
    }


def test_runtime_params_do_not_change_keys_but_others_do(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    _run(store, ["x"], delay_s=0.0)
    _, stats = _run(store, ["x"], delay_s=0.01)
    assert stats.calls == 0
    _, stats = _run(store, ["x"], temperature=0.5)
    assert stats.calls == 1


def test_blocked_items_are_not_called(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    stats = ComponentStats()
    lazy = LazyComponent(Echo(), stats)
    blocked = Failure("upstream_failed", "no plan")
    results = run_stage(lazy, [StageItem(0, None, blocked)], store)
    assert results[0] is blocked and stats.calls == 0 and stats.loads == 0


def test_retry_failures_recomputes_only_failures(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    _run(store, ["ok", "timeout"])
    stats = ComponentStats()
    lazy = LazyComponent(Echo(), stats)
    items = [StageItem(0, {"current_text": "ok"}), StageItem(1, {"current_text": "timeout"})]
    run_stage(lazy, items, store, retry_failures=True)
    assert stats.calls == 1 and stats.cache_hits == 1


def test_record_without_blob_is_recomputed(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    sha = store.put_blob(b"abc", "png")
    key = call_key("image/x", "1", {}, {"image_prompt": "p"})
    store.put(
        CallRecord(key=key, component="image/x", status="ok", output={"blob": sha, "ext": "png"})
    )
    assert store.get(key) is not None
    store.blob_path(sha, "png").unlink()
    assert store.get(key) is None


class Silent(TTSExpert):
    name = "silent-test"

    def run_one(self, item: dict[str, Any]) -> Audio:
        import numpy as np

        return Audio(np.zeros(0, dtype=np.float32), 16000)


def test_empty_waveform_is_an_empty_output_failure(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    stats = ComponentStats()
    item = {k: "x" for k in Silent.reads}
    results = run_stage(LazyComponent(Silent(), stats), [StageItem(0, item)], store)
    assert results[0].failure["category"] == "empty_output"


def test_component_error_category_is_kept(tmp_path: Path) -> None:
    class Picky(Planner):
        name = "picky-test"
        reads = ("current_text",)

        def run_one(self, item):
            raise ComponentError("prompt too short", category="unusable_image_prompt")

    stats = ComponentStats()
    out = run_stage(
        LazyComponent(Picky(), stats), [StageItem(0, {"current_text": "x"})], Store(tmp_path / "s")
    )
    assert out[0].failure["category"] == "unusable_image_prompt"


def _worker(root: str, texts: list[str], queue) -> None:
    _, stats = _run(Store(root), texts, delay_s=0.05)
    queue.put(stats.calls)


def test_two_processes_never_compute_a_key_twice(tmp_path: Path) -> None:
    texts = [f"t{i}" for i in range(12)]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(str(tmp_path / "s"), texts, queue)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    calls = [queue.get(timeout=5), queue.get(timeout=5)]
    assert sum(calls) == len(texts)
    assert len(list((tmp_path / "s" / "calls").rglob("*.json"))) == len(texts)


@pytest.mark.parametrize("value", [b"", b"\x00" * 10])
def test_put_blob_is_content_addressed(tmp_path: Path, value: bytes) -> None:
    store = Store(tmp_path)
    a = store.put_blob(value, "bin")
    b = store.put_blob(value, "bin")
    assert a == b and store.blob_path(a, "bin").read_bytes() == value


class Unloadable(Planner):
    name = "unloadable-test"
    reads = ("current_text",)
    broken = True

    def load(self) -> None:
        if type(self).broken:
            raise OSError("weights not found at /nowhere")

    def run_one(self, item):
        return PlannerResponse("ok")


def test_load_failure_is_reported_but_not_cached(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    items = [StageItem(i, {"current_text": t}) for i, t in enumerate("ab")]
    stats = ComponentStats()
    out = run_stage(LazyComponent(Unloadable(), stats), items, store)
    assert out[0].failure["category"] == "model_error"
    assert "load failed" in out[0].failure["message"] and "/nowhere" in out[0].failure["message"]
    assert stats.calls == 0 and stats.failures == 2
    assert not list((tmp_path / "store/calls").rglob("*.json"))
    Unloadable.broken = False
    stats = ComponentStats()
    out = run_stage(LazyComponent(Unloadable(), stats), items, store)
    assert out[1].status == "ok" and stats.calls == 2
