"""planner=glm|internvl|qwen35 pass the plugin kit's conformance run, against the kit's local
server serving each model under its own name, as vLLM does."""

from __future__ import annotations

import pytest
from omnistory_testkit import FakeServer, check_component
from omnistory_vllm.planner import GLMPlanner, InternVLPlanner, Qwen35Planner


@pytest.mark.parametrize("cls", [GLMPlanner, InternVLPlanner, Qwen35Planner], ids=lambda c: c.name)
def test_vllm_planner_keeps_the_component_contract(cls) -> None:
    model = cls(base_url="http://127.0.0.1:9/v1").params["model"]
    with FakeServer(served_model=model) as server:
        # the model is the served one: another name would be a 404, so it is not varied
        report = check_component(
            cls, base_url=server.openai_base_url, max_retries=0, vary={"temperature": 0.5}
        )
        served = server.bodies("chat")
    assert {"outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("runtime_params (") and "base_url" in p for p in report.passed)
    assert any(p.startswith("output_params (") and "temperature" in p for p in report.passed), str(
        report
    )
    assert any(p.startswith("failures") for p in report.passed), str(report)
    assert served and all(body["model"] == model for body in served)
