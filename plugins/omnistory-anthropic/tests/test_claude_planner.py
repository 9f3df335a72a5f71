"""planner=claude through the real Anthropic SDK against a local Messages API server."""

from __future__ import annotations

import base64
import json

import pytest
from omnistory_anthropic.planner import ClaudePlanner, claude_plan_schema, normalize_base_url
from omnistory_testkit import VALID_PLAN, FakeServer, Reply, demo_planner_items

from omnistory_core.api import Failure, PlannerResponse, parse_plan, plan_json_schema
from omnistory_core.kit.planning.prompts import SYSTEM_PROMPT

KEY_VAR = "OMNI_CLAUDE_TEST_CANARY"  # deliberately not secret-looking: no scrubber hides it
KEY = "sk-ant-canary-8c2f4e61"


@pytest.fixture
def server():
    with FakeServer(usage=(1200, 80)) as srv:
        yield srv


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)


@pytest.fixture(scope="module")
def items():
    return demo_planner_items(limit=2)


def planner(server, **params):
    return ClaudePlanner(
        **{
            "base_url": server.url,
            "api_key_env": KEY_VAR,
            "max_retries": 2,
            "timeout_s": 30,
            **params,
        }
    )


def test_sends_image_block_schema_model_and_key(server, items):
    results = planner(server).run_batch(items)
    assert all(isinstance(r, PlannerResponse) and parse_plan(r.text).ok for r in results)
    requests = server.requests_for("messages")
    assert len(requests) == 2
    images = set()
    for request in requests:
        body = request.body
        # anthropic 2.x sends the key as a bearer token (older SDKs used x-api-key)
        sent_key = request.headers.get("x-api-key") or request.headers.get(
            "authorization", ""
        ).removeprefix("Bearer ")
        assert sent_key == KEY
        assert "anthropic-version" in request.headers
        assert body["model"] == "claude-opus-4-7"
        assert body["max_tokens"] == 2048
        assert body["system"] == SYSTEM_PROMPT
        assert body["output_config"] == {
            "format": {"type": "json_schema", "schema": claude_plan_schema()}
        }
        block, text = body["messages"][0]["content"]
        assert block["type"] == "image" and block["source"]["type"] == "base64"
        assert block["source"]["media_type"] == "image/png"
        images.add(base64.b64decode(block["source"]["data"]))
        assert "Conditions for the next page" in text["text"]
        assert "tools" not in body and "temperature" not in body
    assert images == {item["current_image"].read_bytes() for item in items}


def test_schema_sent_is_the_plan_schema_minus_patterns():
    sent, plan = claude_plan_schema(), plan_json_schema()
    assert sent["required"] == plan["required"]
    assert sent["properties"].keys() == plan["properties"].keys()
    speech, plan_speech = sent["properties"]["speech"], plan["properties"]["speech"]
    assert speech["required"] == plan_speech["required"]
    assert speech["additionalProperties"] is False and sent["additionalProperties"] is False
    for label in ("emotion", "speed", "pitch", "gender"):
        assert speech["properties"][label]["enum"] == plan_speech["properties"][label]["enum"]
    assert "pattern" not in json.dumps(sent)


def test_forced_tool_use_mode(server, items):
    [result] = planner(server, structured_output="tool", effort="low").run_batch(items[:1])
    body = server.requests_for("messages")[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "write_plan"}
    [tool] = body["tools"]
    assert tool["name"] == "write_plan" and tool["strict"] is True
    assert tool["input_schema"] == claude_plan_schema()
    assert body["output_config"] == {"effort": "low"}  # no format: the tool carries the schema
    assert json.loads(result.text) == VALID_PLAN  # the tool call's input, as JSON text
    assert parse_plan(result.text).ok


def test_base_url_with_or_without_v1(server, items):
    assert normalize_base_url("http://h:1/v1/") == "http://h:1"
    assert normalize_base_url("https://api.anthropic.com") == "https://api.anthropic.com"
    assert normalize_base_url(None) is None
    planner(server, base_url=server.url + "/v1").run_batch(items[:1])
    assert [r.path for r in server.requests] == ["/v1/messages"]


def test_429_with_retry_after_is_retried_and_honoured(server, items):
    server.script("messages", Reply.rate_limited("1"))
    [result] = planner(server).run_batch(items[:1])
    assert isinstance(result, PlannerResponse) and parse_plan(result.text).ok
    assert len(server.requests_for("messages")) == 2
    assert (result.usage["attempts"], result.usage["retry_wait_s"]) == (2, 1.0)


def test_overloaded_529_is_retried(server, items):
    server.script("messages", Reply(status=529, headers={"retry-after": "0"}))
    [result] = planner(server).run_batch(items[:1])
    assert isinstance(result, PlannerResponse) and result.usage["attempts"] == 2


def test_malformed_json_comes_back_as_raw_text(server, items):
    raw = '```json\n{"narration": "Lena smiled", "image_prompt": \n```'
    server.script("messages", Reply(text=raw))
    [result] = planner(server).run_batch(items[:1])
    assert isinstance(result, PlannerResponse) and result.text == raw
    assert parse_plan(result.text).failure.category == "plan_json_error"


def test_timeout_becomes_a_timeout_failure(server, items):
    server.script("messages", Reply.slow(5))
    [result] = planner(server, timeout_s=0.3, max_retries=0).run_batch(items[:1])
    assert isinstance(result, Failure) and result.category == "timeout"
    assert len(server.requests_for("messages")) == 1


def test_usage_and_cost(server, items):
    prices = {"claude-opus-4-7": {"input_per_mtok": 5, "output_per_mtok": 25}}
    results = planner(server, prices=prices).run_batch(items)
    for r in results:
        assert (r.usage["input_tokens"], r.usage["output_tokens"]) == (1200, 80)
        assert r.usage["cost_usd"] == pytest.approx((1200 * 5 + 80 * 25) / 1e6)
    [unpriced] = planner(server).run_batch(items[:1])
    assert "cost_usd" not in unpriced.usage


def test_bounded_concurrency(items):
    with FakeServer(hold_until_concurrent=2) as srv:
        results = planner(srv, max_concurrency=2).run_batch(items * 2)
    assert all(isinstance(r, PlannerResponse) for r in results)
    assert srv.peak_in_flight == 2


def test_bad_structured_output_mode_is_a_config_error():
    from omnistory_core.kit.planning.base import PlannerConfigError

    with pytest.raises(PlannerConfigError, match="planner.structured_output"):
        ClaudePlanner(structured_output="grammar")


def test_parameters_are_declared_and_the_yaml_holds_only_the_name():
    from importlib import resources

    import yaml
    from omnistory_testkit import config_node

    conf = yaml.safe_load(
        resources.files("omnistory_anthropic.conf").joinpath("planner", "claude.yaml").read_text()
    )
    assert conf == {"name": "claude"}
    node = config_node(ClaudePlanner)
    assert set(node) - {"name"} == set(ClaudePlanner.param_defaults) - {"seed"}
    assert node["api_key_env"] == "ANTHROPIC_API_KEY"
    params = {k: v for k, v in node.items() if k != "name"}
    assert ClaudePlanner(**params, seed=0).model == "claude-opus-4-7"


def test_preflight_names_the_missing_variable_and_the_remedy(monkeypatch):
    from omnistory_core.api import ComponentError

    planner_ = ClaudePlanner(api_key_env=KEY_VAR, seed=0)
    planner_.preflight()
    monkeypatch.delenv(KEY_VAR)
    with pytest.raises(ComponentError, match=f"{KEY_VAR} is not set.*export {KEY_VAR}="):
        planner_.preflight()
