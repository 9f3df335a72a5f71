"""planner=gpt with planner.batch=true: the OpenAI Batch API through the real SDK, against the
local server's Files + Batches routes (submit, poll, results, the ledger, fallbacks, the CLI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omnistory_openai.planner import GPTPlanner
from omnistory_testkit import (
    BatchFate,
    FakeServer,
    Reply,
    call_key,
    demo_planner_items,
    files_containing,
    recomputed,
    run_cli,
)

from omnistory_core.api import Failure, PlannerResponse, parse_plan
from omnistory_core.kit.batches import BATCH_DISCOUNT, BatchLedger, custom_id, public_url

KEY_VAR = "OMNI_GPT_BATCH_CANARY"  # not secret-looking: no scrubber can hide a leak
KEY = "sk-canary-batch-7f3a9c1e"
PRICES = {"gpt-5.4": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}
FULL_COST = (1000 * 2.0 + 50 * 8.0) / 1e6


@pytest.fixture
def server():
    with FakeServer(usage=(1000, 50)) as srv:
        yield srv


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)


@pytest.fixture(scope="module")
def items():
    return demo_planner_items(limit=3)


def planner(server, store: Path, **params) -> GPTPlanner:
    p = GPTPlanner(
        **{
            "base_url": server.openai_base_url,
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
    p.bind_store(store)  # what the engine does before the stage
    return p


def ledger(server, store: Path) -> BatchLedger:
    return BatchLedger(store, "planner-gpt", provider="openai", endpoint=server.openai_base_url)


def test_submit_poll_results_records(server, items, tmp_path):
    server.batch_polls = 3  # validating / in_progress / finalizing, then completed
    p = planner(server, tmp_path)
    assert p.batch_size >= 1000  # the engine hands it every pending item of the stage at once
    results = p.run_batch([*items, items[0]])  # a duplicate request goes in the batch once

    assert all(isinstance(r, PlannerResponse) and parse_plan(r.text).ok for r in results)
    assert server.requests_for("chat") == []  # nothing went the synchronous way
    [upload] = server.requests_for("files")
    [create] = server.requests_for("batches")
    assert create.body["endpoint"] == "/v1/chat/completions"
    assert create.body["completion_window"] == "24h"
    assert len(server.requests_for("batch")) == 3  # the polls
    assert upload.headers["authorization"] == f"Bearer {KEY}"
    assert upload.body["multipart_bytes"] > 0
    [batch] = server.batches.values()
    assert batch.fate.status == "completed"
    # the lines are exactly the synchronous requests, keyed by the sha256 of their body
    bodies = [body for _, body in batch.lines]
    assert [cid for cid, _ in batch.lines] == [custom_id(b) for b in bodies]
    assert len(bodies) == 3 and all(b["model"] == "gpt-5.4" for b in bodies)
    assert bodies[0]["response_format"]["json_schema"]["strict"] is True
    assert bodies[0]["max_completion_tokens"] == 4096
    for r in results:
        assert r.usage["batch"] is True and r.usage["batch_id"] == batch.id
        assert r.usage["batch_calls"] == 1
        assert r.usage["cost_usd"] == pytest.approx(BATCH_DISCOUNT * FULL_COST)
        assert (r.usage["input_tokens"], r.usage["output_tokens"]) == (1000, 50)
    assert ledger(server, tmp_path).entries() == []  # collected: entries removed


def test_batch_mode_does_not_change_the_cache_key(server, items, tmp_path):
    plain = GPTPlanner(base_url=server.openai_base_url, api_key_env=KEY_VAR)
    batched = planner(server, tmp_path, batch_wait_s=5.0, batch_max_requests=10)
    assert call_key(plain, items[0]) == call_key(batched, items[0])


def test_wait_exceeded_gives_batch_pending_then_a_rerun_collects_without_resubmitting(
    server, items, tmp_path
):
    server.script_batch(BatchFate("pending"))
    first = planner(server, tmp_path, batch_wait_s=0.05).run_batch(items)
    assert all(isinstance(r, Failure) and r.category == "batch_pending" for r in first)
    [batch_id] = server.batches
    assert batch_id in first[0].message and "next run" in first[0].message
    assert recomputed(first[0].to_dict(), "errors")  # the default retry mode
    entries = ledger(server, tmp_path).entries()
    assert sorted(e["batch_id"] for e in entries) == [batch_id] * 3
    assert all(e["endpoint"] == public_url(server.openai_base_url) for e in entries)

    server.end_batches()
    again = planner(server, tmp_path).run_batch(items)  # a new process: only the store is shared
    assert all(isinstance(r, PlannerResponse) and r.usage["batch_id"] == batch_id for r in again)
    assert server.batch_creations() == 1 and server.requests_for("chat") == []
    assert ledger(server, tmp_path).entries() == []


def test_errored_items_fall_back_one_by_one(server, items, tmp_path):
    # the batch's lines are answered in order: the second one gets a provider-side error
    server.script("chat", Reply(), Reply(status=500, message="line failed"), Reply())
    results = planner(server, tmp_path).run_batch(items)
    assert all(isinstance(r, PlannerResponse) and parse_plan(r.text).ok for r in results)
    [sync] = server.requests_for("chat")  # only the failed item went the synchronous way
    [batch] = server.batches.values()
    assert custom_id(sync.body) == batch.lines[1][0]
    assert [r.usage.get("batch", False) for r in results] == [True, False, True]
    assert results[1].usage["batch_fallback_calls"] == 1
    assert results[1].usage["cost_usd"] == pytest.approx(FULL_COST)  # the standard price
    assert ledger(server, tmp_path).entries() == []


@pytest.mark.parametrize(
    ("fate", "synchronous"),
    [(BatchFate("expired", answered=1), 2), (BatchFate("failed"), 3)],
    ids=["expired", "failed"],
)
def test_expired_and_failed_batches_fall_back(server, items, tmp_path, fate, synchronous):
    server.script_batch(fate)
    results = planner(server, tmp_path).run_batch(items)
    assert all(isinstance(r, PlannerResponse) and parse_plan(r.text).ok for r in results)
    assert len(server.requests_for("chat")) == synchronous
    assert sum(bool(r.usage.get("batch")) for r in results) == 3 - synchronous
    assert server.batch_creations() == 1
    assert ledger(server, tmp_path).entries() == []


def test_requests_beyond_the_limits_go_in_several_batches(server, items, tmp_path):
    results = planner(server, tmp_path, batch_max_requests=2).run_batch(items)
    assert all(isinstance(r, PlannerResponse) for r in results)
    assert [len(b.lines) for b in server.batches.values()] == [2, 1]
    one_line = max(len(json.dumps(b)) for b in server.batch_lines())
    planner(server, tmp_path / "bytes", batch_max_bytes=one_line + 200).run_batch(items)
    assert [len(b.lines) for b in server.batches.values()] == [2, 1, 1, 1, 1]
    # a request larger than a batch may be goes the synchronous way
    [tiny] = planner(server, tmp_path / "tiny", batch_max_bytes=100).run_batch(items[:1])
    assert isinstance(tiny, PlannerResponse) and len(server.requests_for("chat")) == 1
    assert len(server.batches) == 5


def test_dry_run_estimate_is_halved(items):
    standard = GPTPlanner(prices=PRICES)
    batched = GPTPlanner(prices=PRICES, batch=True)
    pricing = standard.pricing()  # the planner prices its own calls for the dry run
    assert pricing is not None and pricing.price is not None
    full = standard.estimate(items[0], pricing, None)
    half = batched.estimate(items[0], pricing, None)
    assert half["input_tokens"] == full["input_tokens"] and half["batch"] is True
    assert half["cost_usd"] == pytest.approx(full["cost_usd"] * BATCH_DISCOUNT)


# -- the real CLI --------------------------------------------------------------------------------
CLI = (
    "planner=gpt",
    "planner.batch=true",
    "planner.batch_poll_s=0.05",
    "planner.prices={gpt-5.4:{input_per_mtok:2,output_per_mtok:8}}",
    "dataset.limit=3",
    "output_root=out",
    "engine.progress=false",
)


def test_cli_run_killed_while_polling_resumes_from_the_ledger(tmp_path):
    """The process is killed while it polls; the re-run polls the stored batch id, creates no
    second batch, writes the plans at half price, and the key is in no file."""
    env = {"OPENAI_API_KEY": KEY, "PYTHONUNBUFFERED": "1"}
    with FakeServer(usage=(1000, 50)) as srv:
        srv.script_batch(BatchFate("pending"))
        args = [*CLI, f"planner.base_url={srv.openai_base_url}"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "omnistory_core", *args],
            cwd=tmp_path,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while len(srv.requests_for("batch")) < 2:  # submitted, and polled twice
                assert proc.poll() is None, "the run ended before its batch did"
                assert time.monotonic() < deadline, "no batch polls within 60 s"
                time.sleep(0.05)
        finally:
            proc.kill()
            proc.wait()
        ledger_dir = tmp_path / "out" / "store" / "batches" / "planner-gpt"
        assert len(list(ledger_dir.glob("*/*.json"))) == 3

        srv.end_batches()
        again = run_cli(*args, cwd=tmp_path, env=env, timeout=120)
        assert again.returncode == 0, again.stderr[-3000:]
        assert srv.batch_creations() == 1 and srv.requests_for("chat") == []
    assert list(ledger_dir.glob("*/*.json")) == []

    job = tmp_path / "out" / "runs" / "demo" / "gpt-copy-espeak"
    plans = [json.loads(line) for line in (job / "plans.jsonl").read_text().splitlines()]
    assert len(plans) == 3 and all(p["plan"] is not None for p in plans)
    assert {p["usage"]["batch_id"] for p in plans} == set(srv.batches)
    usage = json.loads((job / "manifest.json").read_text())["usage"]["planner"]
    assert usage["batch_calls"] == 3
    assert usage["cost_usd"] == pytest.approx(3 * BATCH_DISCOUNT * FULL_COST)
    assert files_containing(str(tmp_path / "out"), KEY) == []
    assert KEY not in again.stdout and KEY not in again.stderr
