"""planner=claude with planner.batch=true: Anthropic Message Batches through the real SDK, against
the local server's Message Batches routes."""

from __future__ import annotations

import pytest
from omnistory_anthropic.planner import ClaudePlanner
from omnistory_testkit import BatchFate, FakeServer, Reply, demo_planner_items

from omnistory_core.api import Failure, PlannerResponse, parse_plan
from omnistory_core.kit.batches import BATCH_DISCOUNT, BatchLedger, custom_id

KEY_VAR = "OMNI_CLAUDE_BATCH_CANARY"
KEY = "sk-ant-canary-batch-41d2"
PRICES = {"claude-opus-4-7": {"input_per_mtok": 5.0, "output_per_mtok": 25.0}}
FULL_COST = (1200 * 5.0 + 80 * 25.0) / 1e6


@pytest.fixture
def server():
    with FakeServer(usage=(1200, 80)) as srv:
        yield srv


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)


@pytest.fixture(scope="module")
def items():
    return demo_planner_items(limit=3)


def planner(server, store, **params) -> ClaudePlanner:
    p = ClaudePlanner(
        **{
            "base_url": server.url,
            "api_key_env": KEY_VAR,
            "batch": True,
            "batch_poll_s": 0.01,
            "max_retries": 1,
            "retry_base_delay_s": 0.01,
            "timeout_s": 30,
            "prices": PRICES,
            **params,
        }
    )
    p.bind_store(store)
    return p


def entries(server, store) -> list:
    return BatchLedger(store, "planner-claude", provider="anthropic", endpoint=server.url).entries()


def test_submit_poll_results_records(server, items, tmp_path):
    server.batch_polls = 2
    results = planner(server, tmp_path, structured_output="tool").run_batch(items)
    assert all(isinstance(r, PlannerResponse) and parse_plan(r.text).ok for r in results)
    assert server.requests_for("messages") == []
    [create] = server.requests_for("message_batches")
    sent = create.headers.get("x-api-key") or create.headers["authorization"].split()[-1]
    assert sent == KEY
    requests = create.body["requests"]
    assert [r["custom_id"] for r in requests] == [custom_id(r["params"]) for r in requests]
    params = requests[0]["params"]  # the messages.create parameters, as they are
    assert params["model"] == "claude-opus-4-7" and params["tool_choice"]["type"] == "tool"
    assert params["messages"][0]["content"][0]["type"] == "image"
    assert len(server.requests_for("message_batch_results")) == 1
    [batch_id] = server.batches
    for r in results:
        assert r.usage["batch"] is True and r.usage["batch_id"] == batch_id
        assert r.usage["cost_usd"] == pytest.approx(BATCH_DISCOUNT * FULL_COST)
    assert entries(server, tmp_path) == []


def test_errored_and_expired_results_fall_back_one_by_one(server, items, tmp_path):
    server.script("messages", Reply(), Reply(status=529, message="overloaded"))
    server.script_batch(BatchFate("expired", answered=2))  # the third line expires
    results = planner(server, tmp_path).run_batch(items)
    assert all(isinstance(r, PlannerResponse) and parse_plan(r.text).ok for r in results)
    synchronous = server.requests_for("messages")
    [batch] = server.batches.values()
    assert sorted(custom_id(r.body) for r in synchronous) == sorted(
        cid for cid, _ in batch.lines[1:]
    )
    assert [bool(r.usage.get("batch")) for r in results] == [True, False, False]
    assert results[2].usage["cost_usd"] == pytest.approx(FULL_COST)


def test_refused_batch_falls_back(server, items, tmp_path):
    server.script_batch(BatchFate("failed", message="requests: too large"))
    results = planner(server, tmp_path).run_batch(items)
    assert all(isinstance(r, PlannerResponse) for r in results)
    assert len(server.requests_for("messages")) == 3 and server.batches == {}


def test_wait_exceeded_then_a_rerun_polls_the_stored_batch(server, items, tmp_path):
    server.script_batch(BatchFate("pending"))
    first = planner(server, tmp_path, batch_wait_s=0).run_batch(items)
    assert all(isinstance(r, Failure) and r.category == "batch_pending" for r in first)
    assert len(entries(server, tmp_path)) == 3
    server.end_batches()
    again = planner(server, tmp_path).run_batch(items)
    assert all(isinstance(r, PlannerResponse) and r.usage["batch"] for r in again)
    assert server.batch_creations() == 1 and server.requests_for("messages") == []
    assert entries(server, tmp_path) == []
