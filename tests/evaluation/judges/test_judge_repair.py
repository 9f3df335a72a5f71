"""The stage-end repair pass against a local fake repair endpoint (real openai SDK)."""

from __future__ import annotations

import json

import pytest
from omnistory_eval.judges import (
    CRITERIA,
    RepairModel,
    repair_stage,
    unsupported_scores,
)
from omnistory_eval.judges.judge import KimiAudioSpeechJudge, Qwen3TextJudge
from omnistory_eval.judges.prompts import REPAIR_SYSTEM, repair_messages
from omnistory_eval.judges.rubric import repair_json_schema
from omnistory_testkit import LocalChatServer, Reply

pytest.importorskip("openai")

SPEECH = CRITERIA["speech"]

# what the speech judge "said" (keyed by the case named in the candidate's file name)
RAW = {
    "complete": (
        "alignment_with_metadata: 8 (fits the fable); naturalness and conversational relevance: 7 "
        "(clear); satisfaction_of_generation_conditions = 6 since pitch is off; "
        "semantic consistency and persona match with ground truth: 9 - right speaker"
    ),
    "partial": "alignment_with_metadata: 8 (fits); naturalness_and_conversational_relevance: 7",
    "garbage": "The audio was nice.",
    "empty": "",
    "valid": json.dumps({k: {"score": 5, "rationale": "ok"} for k in SPEECH}),
}


def repaired(scores) -> str:
    return json.dumps(
        {
            k: {"score": s, "rationale": f"r{n}"}
            for n, (k, s) in enumerate(zip(SPEECH, scores, strict=True))
        }
    )


# what the repair model answers, per raw answer
REPAIRS = {
    RAW["complete"]: repaired((8, 7, 6, 9)),
    RAW["partial"]: repaired((8, 7, 8, 8)),  # invents the last two scores
    RAW["garbage"]: '{"unrecoverable": true}',
}


def responder(body: dict) -> Reply:
    system = body["messages"][0]
    if system.get("role") == "system" and system["content"] == REPAIR_SYSTEM:
        user = body["messages"][1]["content"]
        raw = user.split("Raw response:\n", 1)[1][:-1]  # the prompt ends with a newline
        return Reply(content=REPAIRS.get(raw, "not json at all"))
    # the speech judge: the candidate audio file name carries the case
    user = body["messages"][-1]["content"]
    text = user[0]["text"] if isinstance(user, list) else user
    for case, raw in RAW.items():
        if f'"line": "{case}"' in text:
            if case == "error":
                break
            return Reply(content=raw)
    return Reply(status=400, error_message="judge failure")


def speech_item(item: dict, case: str) -> dict:
    speech = dict(item["reference_speech"], utterance=case)
    return dict(item, reference_speech=speech)


@pytest.fixture
def judged(item):
    """Speech-judge results for every case, produced through the local server."""
    cases = [*RAW, "error"]
    with LocalChatServer(responder) as server:
        judge = KimiAudioSpeechJudge(backend="openai", base_url=server.base_url, max_retries=0)
        results = judge.run_batch([speech_item(item, c) for c in cases])
        judge.unload()
    return dict(zip(cases, results, strict=True))


def test_stage_repair_outcomes(judged):
    with LocalChatServer(responder) as server:
        repairer = RepairModel(backend="openai", base_url=server.base_url, model="repair")
        stage = repair_stage(list(judged.values()), repairer)
        repairer.unload()
        requests = server.requests
    out = dict(zip(judged, stage.results, strict=True))

    # only the non-empty, successfully generated, unparseable answers went to the repair model
    sent = sorted(r["messages"][1]["content"].split("Raw response:\n", 1)[1][:-1] for r in requests)
    assert sent == sorted([RAW["complete"], RAW["partial"], RAW["garbage"]])

    assert out["complete"].status == "ok"
    assert out["complete"].scores == dict(zip(SPEECH, (8.0, 7.0, 6.0, 9.0), strict=True))
    assert out["complete"].detail["repair_status"] == "succeeded"
    assert out["complete"].detail["parse_method"] == "repaired"
    # an accepted repair keeps the originating judge's identity
    assert out["complete"].detail["judge"] == "speech-kimi-audio-7b"
    assert out["complete"].detail["repair"]["model"] == "Qwen/Qwen3-30B-A3B-Instruct-2507"
    assert out["complete"].detail["raw_response"] == RAW["complete"]

    assert out["partial"].status == "invalid"
    assert out["partial"].detail["repair_status"] == "rejected_invented_score"
    assert out["partial"].detail["repair"]["invented_scores"] == {
        "satisfaction_of_generation_conditions": 8,
        "semantic_consistency_and_persona_match_with_ground_truth": 8,
    }
    assert out["partial"].scores == dict.fromkeys(SPEECH)

    assert out["garbage"].detail["repair_status"] == "unrecoverable"
    assert out["garbage"].status == "invalid"
    assert out["empty"].detail["repair_status"] == "not_eligible"
    assert out["error"].detail["repair_status"] == "not_eligible"
    assert out["valid"] is judged["valid"] and out["valid"].status == "ok"

    assert stage.summary["candidates"] == 3
    assert stage.summary["repair_status_counts"]["rejected_invented_score"] == 1
    # the inputs are not modified
    assert judged["complete"].status == "invalid"


def test_repair_request_uses_the_paper_prompt_and_structured_decoding(judged):
    with LocalChatServer(responder) as server:
        repairer = RepairModel(backend="openai", base_url=server.base_url)
        repair_stage([judged["complete"]], repairer)
        (body,) = server.requests
    assert body["messages"] == repair_messages(
        track="speech",
        raw_response=RAW["complete"],
        parse_error=judged["complete"].detail["failure"],
    )
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == repair_json_schema("speech")
    assert body["model"] == "Qwen/Qwen3-30B-A3B-Instruct-2507"
    assert body["temperature"] == 0.0 and body["seed"] == 0 and body["max_tokens"] == 1024


def test_unparseable_repair_and_repair_server_errors_fail_cleanly(judged):
    bad = dict(REPAIRS)
    bad[RAW["complete"]] = "still not json"
    with LocalChatServer(lambda b: Reply(content=bad.get(RAW["complete"]))) as server:
        out = repair_stage(
            [judged["complete"]], RepairModel(backend="openai", base_url=server.base_url)
        ).results
    assert out[0].detail["repair_status"] == "failed" and out[0].status == "invalid"
    with LocalChatServer(lambda b: Reply(status=400)) as server:
        out = repair_stage(
            [judged["complete"]],
            RepairModel(backend="openai", max_retries=0, base_url=server.base_url),
        ).results
    assert out[0].detail["repair_status"] == "failed"
    assert "HTTP 400" in out[0].detail["repair"]["error"]


# -- invented-score detection -----------------------------------------------------------------


def test_scores_must_appear_in_the_raw_answer_near_their_key():
    raw = (
        '{"alignment_with_metadata": {"score": 8, "rationale": "fits"}, "natural_flow_from_'
        'current_narration": {"score": 7 "rationale": "ok"}}'
    )
    ok = {"alignment_with_metadata": 8, "natural_flow_from_current_narration": 7}
    assert unsupported_scores(raw, ok, "text") == {}
    swapped = {"alignment_with_metadata": 7, "natural_flow_from_current_narration": 8}
    assert unsupported_scores(raw, swapped, "text") == swapped


def test_scores_without_a_recognisable_key_are_matched_once_each():
    raw = "aligment: 8, flow 7, conditions 8"  # misspelt / short keys
    scores = {
        "alignment_with_metadata": 8,
        "natural_flow_from_current_narration": 7,
        "satisfaction_of_generation_conditions": 8,
        "semantic_consistency_with_ground_truth": 8,
    }
    assert unsupported_scores(raw, scores, "text") == {"semantic_consistency_with_ground_truth": 8}


def test_fractional_scores_do_not_support_rounded_repairs():
    raw = '{"alignment_with_metadata": {"score": 7.5, "rationale": "x"}}'
    assert unsupported_scores(raw, {"alignment_with_metadata": 8}, "text") == {
        "alignment_with_metadata": 8
    }
    assert unsupported_scores(raw, {"alignment_with_metadata": 7}, "text") == {
        "alignment_with_metadata": 7
    }
    assert (
        unsupported_scores(
            '{"alignment_with_metadata": {"score": 7.0}}', {"alignment_with_metadata": 7}, "text"
        )
        == {}
    )


# -- finalize_stage: the runner hook, with the real store ----------------------------------


def test_finalize_stage_repairs_stored_results(tmp_path, item):
    from omnistory_core.engine.stage import encode_result
    from omnistory_core.engine.store import CallRecord, Store

    store = Store(tmp_path / "store")
    raw_complete = RAW["complete"].replace(
        "naturalness and conversational relevance", "natural flow from current narration"
    )
    raw_complete = raw_complete.replace(
        "satisfaction_of_generation_conditions", "satisfaction of generation conditions"
    )
    raw_complete = raw_complete.replace(
        "semantic consistency and persona match with ground truth",
        "semantic consistency with ground truth",
    )

    def text_responder(body):
        if body["messages"][0]["content"] == REPAIR_SYSTEM:
            return Reply(
                content=json.dumps(
                    {
                        k: {"score": s, "rationale": "r"}
                        for k, s in zip(CRITERIA["text"], (8, 7, 6, 9), strict=True)
                    }
                )
            )
        return Reply(content=raw_complete)

    with LocalChatServer(text_responder) as server:
        judge = Qwen3TextJudge(
            backend="openai",
            base_url=server.base_url,
            repair={"backend": "openai", "base_url": server.base_url},
        )
        (result,) = judge.run_batch([item])
        assert result.status == "invalid" and result.detail["repair_status"] == "pending"
        status, output, failure, usage = encode_result("judge", result, store)
        record = CallRecord(key="k1", component=judge.key(), status=status, output=output)
        store.put(record)
        outcomes = judge.finalize_stage({0: record, 1: record}, store)
        n_requests = len(server.requests)
    assert n_requests == 2  # one judge call, one repair call (the duplicate outcome shares it)
    assert outcomes[0] is outcomes[1]
    assert outcomes[0].output["status"] == "ok"
    assert outcomes[0].output["detail"]["repair_status"] == "succeeded"
    stored = store.get("k1")
    assert stored.output["status"] == "ok"
    assert stored.output["scores"]["semantic_consistency_with_ground_truth"] == 9.0
    # a second pass has nothing left to repair
    assert judge.finalize_stage({0: stored}, store)[0] is stored


def test_finalize_stage_without_repair_config_is_a_no_op(item):
    judge = Qwen3TextJudge(backend="openai", base_url="http://127.0.0.1:9/v1", repair=False)
    outcomes = {0: object()}
    assert judge.finalize_stage(outcomes, store=None) is outcomes
