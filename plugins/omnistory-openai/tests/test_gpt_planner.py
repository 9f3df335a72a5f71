"""planner=gpt through the real OpenAI SDK against a local Chat Completions server."""

from __future__ import annotations

import base64

import pytest
from omnistory_openai.planner import GPTPlanner
from omnistory_testkit import FakeServer, Reply, call_key, demo_planner_items

from omnistory_core.api import (
    ComponentError,
    Failure,
    PlannerResponse,
    parse_plan,
    plan_response_format,
)

KEY_VAR = "OMNI_GPT_TEST_CANARY"  # deliberately not secret-looking: no scrubber hides it
KEY = "sk-canary-gpt-5d1e0b7a"
PRICES = {"gpt-5.4": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}


@pytest.fixture
def server():
    with FakeServer(usage=(1000, 50)) as srv:
        yield srv


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)


@pytest.fixture(scope="module")
def items():
    return demo_planner_items(limit=2)


def planner(server, **params):
    return GPTPlanner(
        **{
            "base_url": server.openai_base_url,
            "api_key_env": KEY_VAR,
            "max_retries": 2,
            "timeout_s": 30,
            **params,
        }
    )


def test_sends_image_schema_model_and_key(server, items):
    results = planner(server).run_batch(items)
    assert all(isinstance(r, PlannerResponse) and parse_plan(r.text).ok for r in results)
    requests = server.requests_for("chat")
    assert len(requests) == 2
    images = set()
    for request in requests:
        body = request.body
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert body["model"] == "gpt-5.4"
        assert body["response_format"] == plan_response_format()
        assert body["response_format"]["json_schema"]["strict"] is True
        assert body["max_completion_tokens"] == 4096 and body["seed"] == 0
        assert "temperature" not in body  # null = the API default
        system, user = body["messages"]
        assert system["role"] == "system"
        image_part, text_part = user["content"]
        url = image_part["image_url"]["url"]
        assert url.startswith("data:image/png;base64,")
        images.add(base64.b64decode(url.split(",", 1)[1]))
        assert "Conditions for the next page" in text_part["text"]
    assert images == {item["current_image"].read_bytes() for item in items}


def test_optional_request_fields(server, items):
    planner(
        server,
        reasoning_effort="low",
        verbosity="low",
        image_detail="high",
        temperature=0.3,
        structured_output=False,
        prompt="paper_like",
    ).run_batch(items[:1])
    body = server.requests_for("chat")[0].body
    assert (body["reasoning_effort"], body["verbosity"], body["temperature"]) == ("low", "low", 0.3)
    assert body["messages"][1]["content"][0]["image_url"]["detail"] == "high"
    assert "response_format" not in body
    assert "in the style of the book" in body["messages"][1]["content"][1]["text"]


def test_429_with_retry_after_is_retried_and_honoured(server, items):
    server.script("chat", Reply.rate_limited("1"))
    [result] = planner(server).run_batch(items[:1])
    assert isinstance(result, PlannerResponse) and parse_plan(result.text).ok
    assert len(server.requests_for("chat")) == 2
    assert result.usage["attempts"] == 2
    assert result.usage["retry_wait_s"] == 1.0  # exactly the server's Retry-After


def test_5xx_with_retry_after_ms_is_retried(server, items):
    server.script(
        "chat",
        Reply(status=503, headers={"retry-after-ms": "20"}),
        Reply(status=500, headers={"retry-after": "0"}),
    )
    [result] = planner(server).run_batch(items[:1])
    assert isinstance(result, PlannerResponse)
    assert result.usage["attempts"] == 3 and result.usage["retry_wait_s"] == 0.02


def test_retries_run_out_into_model_error(server, items):
    server.script("chat", *[Reply.rate_limited("0")] * 3)
    [result] = planner(server, max_retries=2).run_batch(items[:1])
    assert isinstance(result, Failure) and result.category == "model_error"
    assert "HTTP 429" in result.message and "(3 attempts)" in result.message
    assert len(server.requests_for("chat")) == 3


def test_client_errors_are_not_retried(server, items):
    server.script("chat", Reply(status=400, message="bad image"))
    [result] = planner(server).run_batch(items[:1])
    assert isinstance(result, Failure) and result.category == "model_error"
    assert "bad image" in result.message
    assert len(server.requests_for("chat")) == 1


def test_malformed_json_comes_back_as_raw_text(server, items):
    raw = 'Sure! Here is the plan: {"narration": "Pip ran'
    server.script("chat", Reply(text=raw))
    [result] = planner(server).run_batch(items[:1])
    assert isinstance(result, PlannerResponse) and result.text == raw
    assert parse_plan(result.text).failure.category == "plan_json_error"


def test_timeout_becomes_a_timeout_failure(server, items):
    server.script("chat", Reply.slow(5), Reply.slow(5))
    [result] = planner(server, timeout_s=0.3, max_retries=1, retry_base_delay_s=0.01).run_batch(
        items[:1]
    )
    assert isinstance(result, Failure) and result.category == "timeout"
    assert "(2 attempts)" in result.message
    assert len(server.requests_for("chat")) == 2


def test_usage_and_cost(server, items):
    results = planner(server, prices=PRICES).run_batch(items)
    for r in results:
        assert (r.usage["input_tokens"], r.usage["output_tokens"]) == (1000, 50)
        assert r.usage["cost_usd"] == pytest.approx((1000 * 2.0 + 50 * 8.0) / 1e6)
        assert r.usage["priced_calls"] == 1
    [unpriced] = planner(server).run_batch(items[:1])  # the shipped table has null prices
    assert "cost_usd" not in unpriced.usage and unpriced.usage["priced_calls"] == 0


def test_bounded_concurrency(items):
    many = items * 3
    with FakeServer(hold_until_concurrent=3) as srv:
        results = planner(srv, max_concurrency=3).run_batch(many)
    assert all(isinstance(r, PlannerResponse) for r in results)
    assert srv.peak_in_flight == 3
    assert len(srv.requests_for("chat")) == 6


def test_missing_key_names_the_variable(server, items, monkeypatch):
    monkeypatch.delenv(KEY_VAR)
    with pytest.raises(ComponentError, match=KEY_VAR):
        planner(server).run_batch(items[:1])
    assert server.requests == []


def test_prompt_variant_is_in_the_cache_key(items):
    keys = {call_key(GPTPlanner(prompt=p, seed=0), items[0]) for p in ("default", "paper_like")}
    assert len(keys) == 2
    assert GPTPlanner(seed=0).output_params()["prompt"] == "default"
    assert "api_key_env" not in GPTPlanner(seed=0).output_params()


def test_parameters_are_declared_and_the_yaml_holds_only_the_name():
    from importlib import resources

    import yaml
    from omnistory_testkit import config_node

    conf = yaml.safe_load(
        resources.files("omnistory_openai.conf").joinpath("planner", "gpt.yaml").read_text()
    )
    assert conf == {"name": "gpt"}
    node = config_node(GPTPlanner)
    assert set(node) - {"name"} == set(GPTPlanner.param_defaults) - {"seed"}
    assert node["model"] == "gpt-5.4" and node["api_key_env"] == "OPENAI_API_KEY"
    assert GPTPlanner(**{k: v for k, v in node.items() if k != "name"}, seed=0).model == "gpt-5.4"


def test_preflight_names_the_missing_variable_and_the_remedy(monkeypatch):
    planner_ = GPTPlanner(api_key_env=KEY_VAR, seed=0)
    planner_.preflight()  # the key is set (fixture)
    monkeypatch.delenv(KEY_VAR)
    with pytest.raises(ComponentError) as info:
        planner_.preflight()
    assert f"environment variable {KEY_VAR} is not set" in str(info.value)
    assert f"export {KEY_VAR}=" in str(info.value)
