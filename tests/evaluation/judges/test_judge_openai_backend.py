"""Judging through the OpenAI-compatible backend: the real openai SDK against a local server."""

from __future__ import annotations

import base64
import json

import pytest
from omnistory_eval.judges import CRITERIA
from omnistory_eval.judges.backends.openai_compat import (
    OpenAICompatibleBackend,
    retry_after_seconds,
)
from omnistory_eval.judges.judge import (
    Gemma4OmniJudge,
    HostedTextJudge,
    Qwen3TextJudge,
    Qwen3VLImageJudge,
    SeedOSSTextJudge,
)
from omnistory_eval.judges.render import render_prompt
from omnistory_eval.judges.specs import JUDGE_SPECS
from omnistory_testkit import LocalChatServer, Reply

from omnistory_core.scores import ScoreRow

pytest.importorskip("openai")


def valid(track="text", scores=(8, 7, 6, 9)) -> str:
    return json.dumps(
        {
            k: {"score": s, "rationale": f"because {n}"}
            for n, (k, s) in enumerate(zip(CRITERIA[track], scores, strict=True))
        }
    )


ANSWERS = {
    "valid": valid(),
    "fenced": "```json\n" + valid(scores=(5, 5, 5, 5)) + "\n```",
    "prose": "Sure! My scores:\n" + valid(scores=(9, 9, 8, 7)) + "\nThanks.",
    "truncated": valid()[:120],
    "out_of_range": valid(scores=(8, 12, 6, 9)),
    "empty": "",
}


def by_candidate(body: dict) -> Reply:
    """Answer according to the candidate narration, which names the case."""
    user = body["messages"][-1]["content"]
    for case, text in ANSWERS.items():
        if f"case:{case}\n" in user:
            return Reply(content=text)
    return Reply(status=400, error_message="unknown case")


def text_item(item: dict, case: str) -> dict:
    return dict(item, candidate_text=f"case:{case}")


def test_statuses_for_valid_fenced_prose_truncated_out_of_range_and_empty(item):
    with LocalChatServer(by_candidate) as server:
        judge = Qwen3TextJudge(backend="openai", base_url=server.base_url, concurrency=3)
        results = judge.run_batch([text_item(item, c) for c in ANSWERS])
        judge.unload()
    got = {
        c: (r.status, r.detail["parse_method"], r.detail["repair_status"])
        for c, r in zip(ANSWERS, results, strict=True)
    }
    assert got == {
        "valid": ("ok", "direct", "not_needed"),
        "fenced": ("ok", "normalized", "not_needed"),
        "prose": ("ok", "normalized", "not_needed"),
        "truncated": ("invalid", "unresolved", "pending"),
        "out_of_range": ("invalid", "unresolved", "pending"),
        "empty": ("invalid", "empty", "not_eligible"),
    }
    assert results[1].scores == dict.fromkeys(CRITERIA["text"], 5.0)
    assert results[3].scores == dict.fromkeys(CRITERIA["text"])
    assert results[4].detail["raw_response"] == ANSWERS["out_of_range"]
    assert "outside 1-10" in results[4].detail["failure"]
    for r in results:
        assert r.detail["judge"] == "text-qwen3-30b-a3b"
        json.dumps(r.detail)  # JSON-able for the store

    # the statuses land in the scores table as ok / invalid rows
    rows = [
        ScoreRow("sys", f"ex{n}", "judge", "text", judge.name, c, r.scores[c], r.status)
        for n, r in enumerate(results)
        for c in judge.criteria
    ]
    assert [r.status for r in rows].count("ok") == 12
    assert [r.status for r in rows].count("invalid") == 12


def test_request_carries_paper_decoding_and_controls(item):
    with LocalChatServer(lambda body: Reply(content=valid())) as server:
        judge = SeedOSSTextJudge(backend="openai", base_url=server.base_url, model="seed")
        (result,) = judge.run_batch([item])
        body = server.requests[0]
    assert result.status == "ok"
    assert body["model"] == "seed"
    assert body["temperature"] == 0.0 and body["top_p"] == 1.0
    assert body["seed"] == 0 and body["max_tokens"] == 1024
    assert body["repetition_penalty"] == 1.0
    assert body["chat_template_kwargs"] == {"thinking_budget": 0}
    expected = render_prompt("text-seed-oss-36b", item).messages
    assert body["messages"] == expected  # string contents go out byte for byte


def test_multimodal_parts_and_constrained_decoding(item):
    answer = valid("omni")
    with LocalChatServer(lambda body: Reply(content=answer)) as server:
        judge = Gemma4OmniJudge(backend="openai", base_url=server.base_url)
        (result,) = judge.run_batch([item])
        body = server.requests[0]
    assert result.status == "ok", result.detail
    assert body["seed"] == 1234 and body["max_tokens"] == 2048
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == list(CRITERIA["omni"])
    kinds = [p["type"] for p in body["messages"][1]["content"]]
    assert kinds[:3] == ["image_url"] * 3 and kinds[-1] == "input_audio"
    url = body["messages"][1]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    with open(item["current_image"], "rb") as fh:
        assert base64.b64decode(url.split(",", 1)[1]) == fh.read()
    audio = body["messages"][1]["content"][-1]["input_audio"]
    assert audio["format"] == "wav"
    with open(item["candidate_speech"], "rb") as fh:
        assert base64.b64decode(audio["data"]) == fh.read()


def test_hosted_judge_sends_no_vllm_fields(item, monkeypatch):
    monkeypatch.setenv("LOCAL_TEST_KEY", "sk-test")
    with LocalChatServer(lambda body: Reply(content=valid())) as server:
        judge = HostedTextJudge(
            base_url=server.base_url, model="gpt-x", api_key_env="LOCAL_TEST_KEY"
        )
        (result,) = judge.run_batch([item])
        body = server.requests[0]
    assert result.status == "ok"
    assert "repetition_penalty" not in body and "chat_template_kwargs" not in body
    assert result.detail["checkpoint"] == result.detail["served_model"] == "gpt-x"


def test_missing_api_key_variable_is_a_clear_error(item, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    judge = HostedTextJudge(
        base_url="http://127.0.0.1:9/v1", model="m", api_key_env="NO_SUCH_KEY_VAR"
    )
    with pytest.raises(ValueError, match="NO_SUCH_KEY_VAR is not set"):
        judge.run_batch([item])


def test_retry_after_is_honoured_then_success(item):
    calls = {"n": 0}

    def flaky(body):
        calls["n"] += 1
        if calls["n"] <= 2:
            return Reply(status=429, headers={"Retry-After": "0.25"}, error_message="slow down")
        return Reply(content=valid())

    waits: list[float] = []
    with LocalChatServer(flaky) as server:
        spec = JUDGE_SPECS["text-qwen3-30b-a3b"]
        backend = OpenAICompatibleBackend(spec, {"base_url": server.base_url}, sleep=waits.append)
        (generation,) = backend.generate([render_prompt(spec.id, item)])
        backend.close()
    assert generation.error is None and generation.attempts == 3
    assert waits == [0.25, 0.25]
    assert calls["n"] == 3


def test_exhausted_retries_and_client_errors_become_inference_failures(item):
    def server_error(body):
        if "case:bad" in body["messages"][-1]["content"]:
            return Reply(status=400, error_message="bad request")
        return Reply(status=503, headers={"retry-after-ms": "10"})

    waits: list[float] = []
    with LocalChatServer(server_error) as server:
        spec = JUDGE_SPECS["text-qwen3-30b-a3b"]
        backend = OpenAICompatibleBackend(
            spec,
            {"base_url": server.base_url, "max_retries": 2, "concurrency": 1},
            sleep=waits.append,
        )
        bad, busy = backend.generate(
            [render_prompt(spec.id, text_item(item, "bad")), render_prompt(spec.id, item)]
        )
        n_requests = len(server.requests)
    assert bad.attempts == 1 and "HTTP 400" in bad.error  # not retried
    assert busy.attempts == 3 and "HTTP 503" in busy.error
    assert waits == [0.01, 0.01]
    assert n_requests == 4


def test_inference_failure_result_is_invalid_and_not_repairable(item):
    with LocalChatServer(lambda body: Reply(status=400, error_message="nope")) as server:
        judge = Qwen3TextJudge(backend="openai", base_url=server.base_url, max_retries=0)
        (result,) = judge.run_batch([item])
    assert result.status == "invalid"
    assert result.detail["inference_status"] == "error"
    assert result.detail["repair_status"] == "not_eligible"
    assert result.scores == dict.fromkeys(CRITERIA["text"])


def test_bad_item_fails_alone(item):
    with LocalChatServer(lambda body: Reply(content=valid("image"))) as server:
        judge = Qwen3VLImageJudge(backend="openai", base_url=server.base_url)
        good, missing = judge.run_batch([item, dict(item, candidate_image=None)])
    assert good.status == "ok"
    assert isinstance(missing, ValueError) and "candidate_image" in str(missing)


def test_unreadable_media_is_an_inference_failure_for_that_item(item):
    with LocalChatServer(lambda body: Reply(content=valid("image"))) as server:
        judge = Qwen3VLImageJudge(backend="openai", base_url=server.base_url)
        (result,) = judge.run_batch([dict(item, candidate_image="/nonexistent/x.png")])
    assert result.status == "invalid" and "/nonexistent/x.png" in result.detail["error"]


def test_concurrency_is_bounded(item):
    with LocalChatServer(lambda body: Reply(content=valid(), delay=0.05)) as server:
        judge = Qwen3TextJudge(backend="openai", base_url=server.base_url, concurrency=3)
        results = judge.run_batch([item] * 10)
        observed = server.max_in_flight
        client_side = judge._backend.max_in_flight
    assert all(r.status == "ok" for r in results)
    assert 1 <= observed <= 3 and client_side <= 3


def test_base_url_is_required():
    with pytest.raises(ValueError, match="needs `base_url`"):
        OpenAICompatibleBackend(JUDGE_SPECS["text-qwen3-30b-a3b"], {})


def test_retry_after_header_forms():
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({}) is None
