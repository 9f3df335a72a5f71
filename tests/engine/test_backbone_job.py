"""Backbone systems in the engine: one record per call, partial plans, per-modality failures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from omnistory_core.builtin.images import NoopImage
from omnistory_core.builtin.noop_tts import NoopTTS
from omnistory_core.components import Audio, Backbone, BackboneOutput, ImageExpert, TTSExpert
from omnistory_core.contract import Failure
from omnistory_core.data import load_demo
from omnistory_core.engine.job import run_job
from omnistory_core.engine.outputs import materialize
from omnistory_core.engine.store import Store

SPEECH = {
    "utterance": "Wait for me!",
    "speaker": "Pip",
    "emotion": "happy",
    "speed": "fast",
    "pitch": "high",
    "gender": "male",
}


def tone(seconds: float = 0.2, rate: int = 16000) -> Audio:
    t = np.arange(int(seconds * rate)) / rate
    return Audio((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate)


class Omni(Backbone):
    """All three modalities; example 1 raises, example 2 omits speech, example 3 an empty wav."""

    name = "omni-test"
    produces = frozenset({"text", "image", "speech"})
    reads = ("metadata",)
    calls: list[int] = []

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        index = int(item["metadata"]["_test_index"])
        type(self).calls.append(index)
        if index == 1:
            raise RuntimeError("CUDA out of memory")
        speech = None if index == 2 else tone(0.0 if index == 3 else 0.2)
        return BackboneOutput(
            text=f"Page {index}.",
            image=Image.new("RGB", (8, 8), (index, 0, 0)),
            speech=speech,
            usage={"tokens": 10},
        )


class TextSpeech(Backbone):
    """T+S: plans per example 0 dict, 1 raw JSON text, 2 unparseable, 3 no image_prompt."""

    name = "ts-test"
    produces = frozenset({"text", "speech"})
    reads = ("metadata",)

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        index = int(item["metadata"]["_test_index"])
        plan: dict[str, Any] | str = {
            0: {"image_prompt": "a fox on a hill"},
            1: 'Sure! ```json\n{"t2i": "a fox at the window",}\n```',
            2: "I would draw a fox.",
            3: {"speech": SPEECH},
        }[index]
        return BackboneOutput(text=f"Page {index}.", speech=tone(), plan=plan)


class TextImage(Backbone):
    """T+I: example 0 a full speech plan, 1 an invalid label, 2 no utterance, 3 no plan."""

    name = "ti-test"
    produces = frozenset({"text", "image"})
    reads = ("metadata",)

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        index = int(item["metadata"]["_test_index"])
        speech = dict(SPEECH)
        if index == 1:
            speech["emotion"] = "furious"
        if index == 2:
            del speech["utterance"]
        plan = None if index == 3 else {"speech": speech}
        return BackboneOutput(text=f"Page {index}.", image=Image.new("RGB", (8, 8)), plan=plan)


class NarrationReader(ImageExpert):
    name = "narration-reader-test"
    reads = ("narration",)

    def run_one(self, item: dict[str, Any]):
        return Image.new("RGB", (4, 4), (len(item["narration"]), 0, 0))


class CountingTTS(TTSExpert):
    name = "counting-tts-test"
    reads = ("utterance", "speaker", "emotion", "speed", "pitch", "gender")
    loads = 0

    def load(self) -> None:
        type(self).loads += 1

    def run_one(self, item: dict[str, Any]) -> Audio:
        return tone()


@pytest.fixture
def examples():
    out = load_demo(limit=4)
    for ex in out:
        ex.metadata["_test_index"] = ex.index
    return out


def categories(job: Path) -> dict[tuple[str, str], str]:
    lines = (job / "missing.txt").read_text().splitlines()
    return {(ln.split("\t")[0], ln.split("\t")[1]): ln.split("\t")[2] for ln in lines}


def test_one_record_holds_every_artifact_and_failures_stay_per_modality(examples, tmp_path):
    store = Store(tmp_path / "store")
    Omni.calls = []
    result = run_job(examples=examples, components={"backbone": Omni(seed=0)}, store=store)
    assert sorted(Omni.calls) == [0, 1, 2, 3]
    stats = result.stats["backbone/omni-test"]
    assert (stats.calls, stats.failures, stats.loads) == (4, 1, 1)
    record = store.get(result.plans[0].key)
    assert record is not None and record.status == "ok"
    assert record.output["text"] == "Page 0."
    assert record.output["image"]["ext"] == "png" and record.output["speech"]["ext"] == "wav"
    assert store.blob_path(record.output["speech"]["blob"], "wav").is_file()

    job = tmp_path / "job"
    assert materialize(job, result, store) == {"text": 1, "image": 1, "speech": 3}
    assert categories(job) == {
        ("1", "text"): "model_error",
        ("1", "image"): "model_error",
        ("1", "speech"): "model_error",
        ("2", "speech"): "backbone_no_speech",
        ("3", "speech"): "empty_output",  # an empty waveform fails speech only
    }
    assert (job / "image" / "3" / "generated.png").is_file()
    assert "CUDA out of memory" in (job / "missing.txt").read_text()
    # retry_failures=none: a fully cached re-run loads and calls nothing (failures are results)
    again = run_job(
        examples=examples, components={"backbone": Omni(seed=0)}, store=store, retry_failures="none"
    )
    stats = again.stats["backbone/omni-test"]
    assert (stats.calls, stats.loads, stats.cache_hits) == (0, 0, 4)
    # the default (errors) recomputes the call that raised; the deterministic failures stay
    Omni.calls = []
    again = run_job(examples=examples, components={"backbone": Omni(seed=0)}, store=store)
    stats = again.stats["backbone/omni-test"]
    assert Omni.calls == [1] and (stats.calls, stats.cache_hits) == (1, 3)
    # retry_failures recomputes the failed call and the one that left speech out, nothing else
    Omni.calls = []
    retry = run_job(
        examples=examples, components={"backbone": Omni(seed=0)}, store=store, retry_failures=True
    )
    assert sorted(Omni.calls) == [1, 2, 3] and retry.stats["backbone/omni-test"].cache_hits == 1


def test_partial_plans_feed_the_image_expert_or_say_which_field_is_missing(examples, tmp_path):
    store = Store(tmp_path / "store")
    comps = {"backbone": TextSpeech(seed=0), "image": NoopImage(seed=0)}
    result = run_job(examples=examples, components=comps, store=store)
    assert result.plans[1].fields["image_prompt"] == "a fox at the window"
    assert "map_official_shape" in result.plans[1].repairs
    job = tmp_path / "job"
    assert materialize(job, result, store) == {"text": 0, "image": 2, "speech": 0}
    assert categories(job) == {("2", "image"): "plan_json_error", ("3", "image"): "upstream_failed"}
    assert "image_prompt" in (job / "missing.txt").read_text().splitlines()[1]
    plans = [json.loads(line) for line in (job / "plans.jsonl").read_text().splitlines()]
    assert plans[0]["plan"] == {"narration": "Page 0.", "image_prompt": "a fox on a hill"}


def test_speech_plan_labels_are_checked_before_the_tts_expert(examples, tmp_path):
    store = Store(tmp_path / "store")
    CountingTTS.loads = 0
    comps = {"backbone": TextImage(seed=0), "tts": CountingTTS(seed=0)}
    result = run_job(examples=examples, components=comps, store=store)
    assert result.stats["tts/counting-tts-test"].calls == 1
    job = tmp_path / "job"
    materialize(job, result, store)
    assert categories(job) == {
        ("1", "speech"): "plan_invalid_label",
        ("2", "speech"): "upstream_failed",
        ("3", "speech"): "upstream_failed",
    }
    messages = (job / "missing.txt").read_text()
    assert "furious" in messages and "speech.utterance" in messages


def test_experts_that_read_the_narration_get_the_backbone_text(examples, tmp_path):
    comps = {"backbone": TextSpeech(seed=0), "image": NarrationReader(seed=0)}
    result = run_job(examples=examples, components=comps, store=Store(tmp_path / "s"))
    assert all(r.status == "ok" for r in result.media["image"].values())


def test_systems_differing_only_in_experts_share_the_backbone_call(examples, tmp_path):
    store = Store(tmp_path / "store")
    Omni.calls = []

    class TI(TextImage):
        name = "ti-shared-test"

        def run_one(self, item):
            Omni.calls.append(int(item["metadata"]["_test_index"]))
            return super().run_one(item)

    first = run_job(
        examples=examples, components={"backbone": TI(seed=0), "tts": NoopTTS(seed=0)}, store=store
    )
    second = run_job(
        examples=examples,
        components={"backbone": TI(seed=0), "tts": CountingTTS(seed=0)},
        store=store,
    )
    assert sorted(Omni.calls) == [0, 1, 2, 3]
    assert first.stats["backbone/ti-shared-test"].calls == 4
    assert second.stats["backbone/ti-shared-test"].cache_hits == 4
    assert second.stats["backbone/ti-shared-test"].loads == 0


def test_a_backbone_returning_the_wrong_type_is_a_contract_error(examples, tmp_path):
    class Wrong(Backbone):
        name = "wrong-test"
        produces = frozenset({"text", "image", "speech"})
        reads = ("metadata",)

        def run_one(self, item):
            return "just text"

    result = run_job(
        examples=examples[:1], components={"backbone": Wrong(seed=0)}, store=Store(tmp_path / "s")
    )
    assert isinstance(result.text[0], Failure)
    assert result.text[0].category == "contract_error"
    assert "returned str for its result, expected a BackboneOutput" in result.text[0].message
    assert result.media["image"][0].category == "contract_error"


def test_a_backbone_explains_its_own_omission(examples, tmp_path):
    class Explains(Backbone):
        name = "explains-test"
        produces = frozenset({"text", "speech"})
        reads = ("metadata",)

        def run_one(self, item):
            return BackboneOutput(
                text="Page.",
                plan={"image_prompt": "a hill"},
                failures={"speech": Failure("timeout", "talker timed out")},
            )

    store = Store(tmp_path / "s")
    result = run_job(
        examples=examples[:1],
        components={"backbone": Explains(seed=0), "image": NoopImage(seed=0)},
        store=store,
    )
    assert result.media["speech"][0] == Failure("timeout", "talker timed out")
    assert result.media["image"][0].status == "ok"
