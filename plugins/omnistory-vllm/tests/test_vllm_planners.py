"""planner=glm|internvl|qwen35 through the real OpenAI SDK against a local vLLM-style server."""

from __future__ import annotations

import base64

import pytest
from omnistory_testkit import FakeServer, Reply, demo_planner_items
from omnistory_vllm.planner import GLMPlanner, InternVLPlanner, Qwen35Planner

from omnistory_core.api import Failure, PlannerResponse, parse_plan, plan_response_format

EXPECTED = {
    GLMPlanner: ("zai-org/GLM-4.6V", {"enable_thinking": False}),
    InternVLPlanner: ("OpenGVLab/InternVL3_5-4B", None),
    Qwen35Planner: ("Qwen/Qwen3.5-4B", {"enable_thinking": False}),
}
LEGACY_FIELDS = (
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "guided_decoding_backend",
    "guided_whitespace_pattern",
)


@pytest.fixture(scope="module")
def items():
    return demo_planner_items(limit=2)


@pytest.mark.parametrize("cls", list(EXPECTED), ids=lambda c: c.name)
def test_request_shape(cls, items):
    model, template_kwargs = EXPECTED[cls]
    with FakeServer(served_model=model, usage=(700, 90)) as srv:
        results = cls(base_url=srv.openai_base_url, seed=5).run_batch(items)
        requests = srv.requests_for("chat")
    assert all(isinstance(r, PlannerResponse) and parse_plan(r.text).ok for r in results)
    assert all(r.usage["input_tokens"] == 700 and "cost_usd" not in r.usage for r in results)
    assert len(requests) == 2
    images = set()
    for request in requests:
        body = request.body
        assert body["model"] == model
        assert body["response_format"] == plan_response_format()
        assert not set(LEGACY_FIELDS) & set(body)  # silently ignored by current vLLM
        assert "structured_outputs" not in body
        assert body.get("chat_template_kwargs") == template_kwargs
        assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.0, 5, 2048)
        assert request.headers["authorization"] == "Bearer EMPTY"  # no key configured
        url = body["messages"][1]["content"][0]["image_url"]["url"]
        assert url.startswith("data:image/png;base64,")
        images.add(base64.b64decode(url.split(",", 1)[1]))
    assert images == {item["current_image"].read_bytes() for item in items}


def test_wrong_model_name_is_a_model_error_without_retries(items):
    with FakeServer(served_model="Qwen/Qwen3.5-4B") as srv:
        [result] = Qwen35Planner(base_url=srv.openai_base_url, model="Qwen/Qwen3.5-9B").run_batch(
            items[:1]
        )
        assert len(srv.requests_for("chat")) == 1
    assert isinstance(result, Failure) and result.category == "model_error"
    assert "HTTP 404" in result.message and "does not exist" in result.message


def test_503_while_loading_is_retried(items):
    with FakeServer(served_model="OpenGVLab/InternVL3_5-4B") as srv:
        srv.script("chat", Reply(status=503, headers={"retry-after": "0"}))
        [result] = InternVLPlanner(base_url=srv.openai_base_url).run_batch(items[:1])
    assert isinstance(result, PlannerResponse) and result.usage["attempts"] == 2


def test_malformed_and_timeout(items):
    with FakeServer(served_model="Qwen/Qwen3.5-4B") as srv:
        srv.script("chat", Reply(text='<think>hmm</think> {"narration": '), Reply.slow(5))
        first, second = Qwen35Planner(
            base_url=srv.openai_base_url, max_concurrency=1, timeout_s=0.3, max_retries=0
        ).run_batch(items)
    assert parse_plan(first.text).failure.category == "plan_json_error"
    assert isinstance(second, Failure) and second.category == "timeout"


def test_optional_api_key(items, monkeypatch):
    monkeypatch.setenv("OMNI_VLLM_TEST_KEY", "local-key-1234")
    with FakeServer(served_model="zai-org/GLM-4.6V") as srv:
        GLMPlanner(base_url=srv.openai_base_url, api_key_env="OMNI_VLLM_TEST_KEY").run_batch(
            items[:1]
        )
        assert srv.requests[0].headers["authorization"] == "Bearer local-key-1234"


def test_bounded_concurrency(items):
    with FakeServer(served_model="Qwen/Qwen3.5-4B", hold_until_concurrent=4) as srv:
        results = Qwen35Planner(base_url=srv.openai_base_url, max_concurrency=4).run_batch(
            items * 4
        )
    assert len(results) == 8 and srv.peak_in_flight == 4


def test_config_errors_name_the_key():
    from omnistory_core.kit.planning.base import PlannerConfigError

    with pytest.raises(PlannerConfigError, match="planner.chat_template_kwargs"):
        Qwen35Planner(chat_template_kwargs=["enable_thinking"])
    with pytest.raises(PlannerConfigError, match="planner.launch_port"):
        Qwen35Planner(launch_port=70000)
    with pytest.raises(PlannerConfigError, match="planner.base_url"):
        Qwen35Planner(base_url=None)
    assert Qwen35Planner(base_url=None, launch=True).params["launch"] is True


def test_schema_patterns_can_be_dropped(items):
    with FakeServer(served_model="Qwen/Qwen3.5-4B") as srv:
        Qwen35Planner(base_url=srv.openai_base_url, schema_patterns=False).run_batch(items[:1])
        schema = srv.requests[0].body["response_format"]["json_schema"]["schema"]
    assert "pattern" not in str(schema)
    full = plan_response_format()["json_schema"]["schema"]
    assert schema["required"] == full["required"]
    assert (
        schema["properties"]["speech"]["properties"]["emotion"]["enum"]
        == full["properties"]["speech"]["properties"]["emotion"]["enum"]
    )
    assert "pattern" in str(full)


@pytest.mark.parametrize("cls", list(EXPECTED), ids=lambda c: c.name)
def test_parameters_are_declared_and_the_yaml_holds_only_the_name(cls):
    from importlib import resources

    import yaml
    from omnistory_testkit import config_node

    conf = yaml.safe_load(
        resources.files("omnistory_vllm.conf").joinpath("planner", f"{cls.name}.yaml").read_text()
    )
    assert conf == {"name": cls.name}
    node = config_node(cls)
    assert set(node) - {"name"} == set(cls.param_defaults) - {"seed"}
    planner = cls(**{k: v for k, v in node.items() if k != "name"}, seed=0)
    assert planner.model == EXPECTED[cls][0]
    assert (planner.params["chat_template_kwargs"] or None) == EXPECTED[cls][1]
    assert planner.params["launch"] is False
