"""What counts as an evaluator `error` (never stored, recomputed) versus a result, the judge
server's fail-fast once unreachable, cache-first hub loading and the pre-flight checks."""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest
from omnistory_eval.judges.backends.base import Generation
from omnistory_eval.judges.judge import Qwen3TextJudge, result_from_generation
from omnistory_eval.judges.specs import JUDGE_SPECS
from omnistory_eval.outcomes import (
    EvaluatorUnavailable,
    failure_error_cause,
    record_error_cause,
)
from omnistory_eval.runner import ResultStore, rows_for

from omnistory_core.engine.store import CallRecord, Store

SPEC = JUDGE_SPECS["text-qwen3-30b-a3b"]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_server_failure_is_an_error_and_a_rejected_request_is_invalid() -> None:
    down = result_from_generation(
        SPEC, Generation(None, error="APIConnectionError: refused"), backend="openai"
    )
    rejected = result_from_generation(
        SPEC, Generation(None, error="HTTP 400: too long", error_kind="request"), backend="openai"
    )
    assert down.status == "error" and rejected.status == "invalid"
    assert down.detail["inference_status"] == rejected.detail["inference_status"] == "error"


@pytest.mark.parametrize(
    ("failure", "is_error"),
    [
        ({"category": "model_error", "message": "load failed: skipped: x not available"}, True),
        ({"category": "model_error", "message": "OutOfMemoryError: CUDA out of memory"}, True),
        ({"category": "model_error", "message": "worker died", "exception": "WorkerDied"}, True),
        ({"category": "timeout", "message": "TimeoutError: batch took too long"}, True),
        (
            {"category": "model_error", "message": "ValueError: reference_speech.pitch missing"},
            False,
        ),
        ({"category": "model_error", "message": "JudgeInputError: no candidate_image"}, False),
    ],
)
def test_failed_calls_are_errors_unless_about_the_item(failure: dict, is_error: bool) -> None:
    assert (failure_error_cause(failure) is not None) == is_error


def test_result_store_neither_keeps_nor_serves_errors(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    # how an earlier version stored a judge whose server was down: an "invalid" result
    legacy = CallRecord(
        key="aa" + "0" * 62,
        component="judge/text-qwen3-30b-a3b",
        status="ok",
        output={
            "scores": {},
            "status": "invalid",
            "detail": {"inference_status": "error", "error": "Connection refused"},
        },
    )
    rejected = CallRecord(
        key="bb" + "0" * 62,
        component="judge/text-qwen3-30b-a3b",
        status="ok",
        output={
            "scores": {},
            "status": "invalid",
            "detail": {"inference_status": "error", "error_kind": "request"},
        },
    )
    store.put(legacy)
    store.put(rejected)
    results = ResultStore(store)
    assert results.get(legacy.key) is None  # recomputed on the next run
    assert results.get(rejected.key) is not None  # the same request fails again: a result
    fresh = CallRecord(
        key="cc" + "0" * 62,
        component="metric/clip",
        status="ok",
        output={
            "scores": {"cosine": None},
            "status": "error",
            "detail": {"error": "OutOfMemoryError"},
        },
    )
    results.put(fresh)
    assert store.get(fresh.key) is None
    assert record_error_cause(fresh) == "OutOfMemoryError"


def test_error_rows_carry_the_cause() -> None:
    judge = Qwen3TextJudge(backend="openai", base_url="http://127.0.0.1:1/v1")
    record = CallRecord(
        key="k",
        component=judge.key(),
        status="failure",
        failure={"category": "model_error", "message": "load failed: no key"},
    )
    rows = rows_for(judge, "sys", "ex", record)
    assert {(r.status, r.score, r.cause) for r in rows} == {("error", None, "load failed: no key")}


def test_answers_awaiting_repair_are_errors_until_repaired() -> None:
    output = {
        "scores": {},
        "status": "invalid",
        "detail": {"inference_status": "ok", "repair_status": "pending"},
    }
    with_repair = Qwen3TextJudge(backend="openai", base_url="x", repair={"backend": "vllm"})
    without = Qwen3TextJudge(backend="openai", base_url="x", repair=False)
    assert with_repair.result_error(output) is not None
    assert without.result_error(output) is None  # no repair permitted: the answer is invalid


def test_unreachable_server_fails_the_remaining_requests_at_once() -> None:
    pytest.importorskip("openai")
    from omnistory_eval.judges.backends.openai_compat import OpenAICompatibleBackend
    from omnistory_eval.judges.render import render_prompt

    item = {
        "current_text": "a",
        "candidate_text": "b",
        "reference_text": "c",
        "metadata": {},
        "conditions": {},
    }
    waits: list[float] = []
    backend = OpenAICompatibleBackend(
        SPEC,
        {"base_url": f"http://127.0.0.1:{_closed_port()}/v1", "max_retries": 2, "concurrency": 1},
        sleep=waits.append,
    )
    prompts = [render_prompt(SPEC.id, item)] * 3
    first, second, third = backend.generate(prompts)
    assert first.attempts == 3 and first.error_kind is None  # retried, then given up
    assert second.attempts == 0 and third.attempts == 0 and "not sent" in (second.error or "")
    assert len(waits) == 2


@pytest.mark.slow(seconds=25)
def test_speech_meta_machinery_failure_is_an_error_not_an_invalid_field() -> None:
    from omnistory_eval.metrics.speech_meta import SpeechMetaMetric

    metric = SpeechMetaMetric()
    wave = np.sin(np.linspace(0, 400 * np.pi, 16000)).astype(np.float32)
    ref = {"emotion": "happy", "speed": "normal", "pitch": "high", "gender": "female"}
    crash = EvaluatorUnavailable("speechbrain worker died")
    bad_clip = ValueError("the clip is too short")
    broken = metric._score(ref, wave, bad_clip, bad_clip, crash)
    assert broken.status == "error" and "worker died" in broken.detail["error"]
    unlucky = metric._score(ref, wave, bad_clip, bad_clip, bad_clip)
    assert unlucky.status == "ok" and unlucky.scores["emotion"] is None  # the paper's rule


def test_cache_first_loads_offline_without_asking_an_unreachable_hub(monkeypatch, tmp_path):
    pytest.importorskip("huggingface_hub")
    from huggingface_hub import constants

    from omnistory_core.kit import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hub, "_probe_result", {})
    seen = []

    def loader():
        seen.append((constants.HF_HUB_OFFLINE, hub.offline_requested()))
        return "loaded"

    # not cached and the hub unreachable: the load runs in offline mode (fails fast if missing)
    assert hub.load_cache_first(["org/model"], loader) == "loaded"
    assert seen[-1] == (True, True)
    reachable, why = hub.hub_reachable()
    assert not reachable and "unreachable" in why
    state = hub.checkpoint_state("org/model")
    assert state.source == "unavailable" and "not in the local cache" in (state.problem or "")

    # cached: offline as well, and the probe is not repeated
    snapshot = tmp_path / "hub/models--org--cached/snapshots/abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (tmp_path / "hub/models--org--cached/refs").mkdir()
    (tmp_path / "hub/models--org--cached/refs/main").write_text("abc123")
    assert hub.cached_snapshot("org/cached") == str(snapshot)
    assert hub.checkpoint_state("org/cached").source == "cache"
    hub.load_cache_first(["org/cached"], loader)
    assert seen[-1] == (True, True)
    assert not hub.offline_requested()  # restored afterwards


def test_preflight_reports_every_problem_of_an_evaluator(monkeypatch) -> None:
    from omnistory_eval.preflight import preflight

    monkeypatch.delenv("NO_SUCH_JUDGE_KEY", raising=False)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    judge = Qwen3TextJudge(
        backend="openai",
        base_url=url,
        api_key_env="NO_SUCH_JUDGE_KEY",
        repair={"backend": "openai"},
    )
    problems = preflight([judge])
    found = {(p.check, p.target) for p in problems}
    assert ("server", url) in found
    assert ("key", "NO_SUCH_JUDGE_KEY") in found
    assert ("config", "judge.text-qwen3-30b-a3b.repair.base_url") in found
    assert all(p.remedy for p in problems)


def test_any_component_can_load_cache_first(monkeypatch, tmp_path):
    """The helper for generation components: checkpoints from the component's own parameters."""
    pytest.importorskip("huggingface_hub")
    from huggingface_hub import constants

    from omnistory_core.components import ImageExpert
    from omnistory_core.kit import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hub, "_probe_result", {})

    class Expert(ImageExpert):
        name = "hub-expert"

        def load(self):
            self.offline_during_load = constants.HF_HUB_OFFLINE

    expert = Expert(model="org/diffusion-model")
    hub.load_component(expert)
    assert expert.offline_during_load is True  # unreachable hub: fail fast, no per-file retries
    assert not hub.offline_requested()


@pytest.mark.parametrize(
    ("status", "reachable"), [(404, True), (401, True), (502, False), (407, False)]
)
def test_hub_probe_tells_a_hub_answer_from_a_gateway_standing_in(monkeypatch, status, reachable):
    import http.server
    import threading

    from omnistory_core.kit import hub

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:  # noqa: N802 - the http.server protocol
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTP_PROXY", "http_proxy"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        monkeypatch.setattr(hub, "_probe_result", {})
        ok, why = hub.hub_reachable()
        assert ok is reachable
        assert (why == "") is reachable and (reachable or f"HTTP {status}" in why)
    finally:
        server.shutdown()


def test_offline_reason_names_the_variable_that_is_set(monkeypatch) -> None:
    from omnistory_core.kit import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    assert hub.hub_reachable() == (False, "TRANSFORMERS_OFFLINE is set")
    assert "TRANSFORMERS_OFFLINE is set" in (hub.checkpoint_state("org/absent").problem or "")
