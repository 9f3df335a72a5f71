"""VLMPlanner: parameters, cache key, API key handling and the call flow.

`UrllibPlanner` is a complete (if minimal) planner built on VLMPlanner that speaks OpenAI Chat
Completions with urllib to the local FakeServer, so the base class runs end to end without
any SDK.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from omnistory_testkit import FakeServer, Reply, demo_planner_items

from omnistory_core.components import ComponentError, PlannerResponse
from omnistory_core.contract import Failure
from omnistory_core.engine.stage import item_key
from omnistory_core.kit.planning.base import PlannerConfigError, VLMPlanner
from omnistory_core.kit.planning.messages import openai_chat_messages
from omnistory_core.kit.planning.replies import ModelReply
from omnistory_core.plan_schema import parse_plan

CANARY_VAR = "OMNI_BASE_TEST_CANARY"
CANARY = "canary-base-7f3e9a1c"


class HTTPStatus(Exception):
    def __init__(self, err: urllib.error.HTTPError):
        super().__init__(f"HTTP {err.code}: {err.read().decode()}")
        self.status_code = err.code
        self.response = err  # .headers, like the SDK's response


class UrllibPlanner(VLMPlanner):
    name = "urllib_test"
    param_defaults = {**VLMPlanner.param_defaults, "model": "test-model", "api_key_env": CANARY_VAR}

    def make_client(self, api_key):
        return {"key": api_key, "url": self.params["base_url"]}

    def send(self, client, request):
        body = json.dumps({"model": self.model, "messages": openai_chat_messages(request)})
        req = urllib.request.Request(
            client["url"] + "/chat/completions",
            data=body.encode(),
            headers={
                "Authorization": f"Bearer {client['key']}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=self.params["timeout_s"]) as resp:
                data = json.loads(resp.read())
        except urllib.error.HTTPError as err:
            raise HTTPStatus(err) from None
        return ModelReply(
            data["choices"][0]["message"]["content"],
            data["usage"]["prompt_tokens"],
            data["usage"]["completion_tokens"],
        )


@pytest.fixture
def canary(monkeypatch):
    monkeypatch.setenv(CANARY_VAR, CANARY)
    return CANARY


@pytest.fixture
def server():
    with FakeServer(usage=(300, 40)) as srv:
        yield srv


# -- parameters -------------------------------------------------------------------------------


def test_defaults_fill_every_parameter():
    planner = UrllibPlanner()
    assert planner.params["prompt"] == "default"
    assert planner.params["max_concurrency"] == 4
    assert set(planner.params) == set(UrllibPlanner.param_defaults)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"temprature": 0.1}, "unknown parameter.*temprature"),
        ({"model": ""}, "planner.model must be a model name"),
        ({"max_concurrency": 0}, "planner.max_concurrency must be an integer >= 1"),
        ({"max_retries": -1}, "planner.max_retries must be an integer >= 0"),
        ({"timeout_s": 0}, "planner.timeout_s must be a number > 0"),
        ({"prompt": "chatty"}, "planner.prompt must be one of"),
        ({"temperature": "hot"}, "planner.temperature must be null or a number"),
        ({"image_max_side": 0}, "planner.image_max_side"),
        ({"api_key_env": ""}, "planner.api_key_env"),
        (
            {"prices": {"test-model": {"input_per_mtok": -1, "output_per_mtok": 1}}},
            "planner.prices.test-model.input_per_mtok",
        ),
    ],
)
def test_bad_parameters_name_the_key(params, message):
    with pytest.raises(PlannerConfigError, match=message):
        UrllibPlanner(**params)


def test_cache_key_holds_output_params_and_prompt_only():
    item = demo_planner_items(limit=1)[0]
    base = UrllibPlanner(seed=0)
    params = base.output_params()
    for runtime in (
        "base_url",
        "api_key_env",
        "max_concurrency",
        "timeout_s",
        "max_retries",
        "prices",
        "retry_base_delay_s",
        "retry_max_delay_s",
    ):
        assert runtime not in params
    assert params["prompt"] == "default"
    assert len(params["prompt_sha256"]) == 64
    key = item_key(base, item)
    same = UrllibPlanner(
        seed=0,
        base_url="http://elsewhere/v1",
        max_concurrency=32,
        timeout_s=5,
        max_retries=0,
        api_key_env="OTHER",
        prices={"test-model": {"input_per_mtok": 1, "output_per_mtok": 2}},
    )
    assert item_key(same, item) == key
    for changed in (
        {"prompt": "paper_like"},
        {"narration_target_chars": 80},
        {"model": "other"},
        {"temperature": 0.2},
        {"seed": 1},
        {"max_tokens": 99},
    ):
        assert item_key(UrllibPlanner(**{"seed": 0, **changed}), item) != key, changed


# -- calls ------------------------------------------------------------------------------------


def test_flow_retry_usage_and_raw_text(server, canary):
    # one queue per route, in request order: item 1 (429, then its retry), item 2
    server.script("chat", Reply.rate_limited("0"), Reply(), Reply(text="{broken"))
    planner = UrllibPlanner(
        base_url=server.openai_base_url,
        max_concurrency=1,
        prices={"test-model": {"input_per_mtok": 10, "output_per_mtok": 100}},
    )
    first, second = planner.run_batch(demo_planner_items(limit=2))
    assert isinstance(first, PlannerResponse) and parse_plan(first.text).ok
    assert first.usage["attempts"] == 2 and first.usage["retry_wait_s"] == 0.0
    assert first.usage["cost_usd"] == pytest.approx((300 * 10 + 40 * 100) / 1e6)
    assert second.text == "{broken"
    assert parse_plan(second.text).failure.category == "plan_json_error"
    assert [r.headers["authorization"] for r in server.requests_for("chat")] == [
        f"Bearer {canary}"
    ] * 3


def test_missing_api_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv(CANARY_VAR, raising=False)
    planner = UrllibPlanner(base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ComponentError, match=CANARY_VAR) as info:
        planner.run_batch(demo_planner_items(limit=1))
    assert info.value.category == "model_error"


def test_the_key_is_scrubbed_from_failure_messages(server, canary):
    server.script("chat", Reply(status=401, message=f"Incorrect API key provided: {canary}"))
    planner = UrllibPlanner(base_url=server.openai_base_url, max_retries=3)
    [result] = planner.run_batch(demo_planner_items(limit=1))
    assert isinstance(result, Failure) and result.category == "model_error"
    assert "HTTP 401" in result.message and "(1 attempt)" in result.message
    assert canary not in result.message and "REDACTED" in result.message


def test_bad_image_is_an_item_failure(server, canary, tmp_path):
    from omnistory_core.components import Media

    bad = tmp_path / "page.png"
    bad.write_text("nope")
    item = {**demo_planner_items(limit=1)[0], "current_image": Media(str(bad), "0")}
    [result] = UrllibPlanner(base_url=server.openai_base_url).run_batch([item])
    assert isinstance(result, Failure) and str(bad) in result.message
    assert server.requests == []
