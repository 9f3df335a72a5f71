"""planner=claude passes the plugin kit's conformance run, against the kit's local Messages API
server."""

from __future__ import annotations

from omnistory_anthropic.planner import ClaudePlanner
from omnistory_testkit import FakeServer, check_component

KEY_VAR = "OMNI_CLAUDE_CONFORMANCE_KEY"


def test_claude_planner_keeps_the_component_contract(monkeypatch) -> None:
    monkeypatch.setenv(KEY_VAR, "sk-ant-local-conformance")
    with FakeServer() as server:
        report = check_component(
            ClaudePlanner,
            base_url=server.url,
            api_key_env=KEY_VAR,
            max_retries=0,
            vary={"temperature": 0.2, "prompt": "official"},
        )
        served = server.requests_for("messages")
    assert {"outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("runtime_params (") and "base_url" in p for p in report.passed)
    assert any(
        p.startswith("output_params (") and "model" in p and "temperature" in p
        for p in report.passed
    ), str(report)
    assert any(p.startswith("failures") for p in report.passed), str(report)
    assert served
    for request in served:  # SDK versions send the key in one header or the other
        sent = request.headers.get("x-api-key") or request.headers.get("authorization", "")
        assert sent.removeprefix("Bearer ") == "sk-ant-local-conformance"
