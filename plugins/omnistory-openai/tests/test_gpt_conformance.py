"""planner=gpt passes the plugin kit's conformance run, against the kit's local OpenAI server."""

from __future__ import annotations

from omnistory_openai.planner import GPTPlanner
from omnistory_testkit import FakeServer, check_component

KEY_VAR = "OMNI_GPT_CONFORMANCE_KEY"


def test_gpt_planner_keeps_the_component_contract(monkeypatch) -> None:
    monkeypatch.setenv(KEY_VAR, "sk-local-conformance")
    with FakeServer() as server:
        report = check_component(
            GPTPlanner,
            base_url=server.openai_base_url,
            api_key_env=KEY_VAR,
            max_retries=0,
            # null defaults (the API's own) have no obvious other value: name one
            vary={"temperature": 0.2, "prompt": "official"},
        )
        served = server.requests_for("chat")
    assert {"outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("runtime_params (") and "base_url" in p for p in report.passed)
    assert any(
        p.startswith("output_params (") and "model" in p and "temperature" in p and "prompt" in p
        for p in report.passed
    ), str(report)
    assert any(p.startswith("failures") for p in report.passed), str(report)
    # every computed call went through the real SDK to the local server, with the key
    assert served and all(
        r.headers["authorization"] == "Bearer sk-local-conformance" for r in served
    )
