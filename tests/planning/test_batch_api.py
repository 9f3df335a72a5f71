"""omnistory_core.kit.batches: custom ids, the ledger, the price, and the loop over the real openai
SDK against the local server's Files + Batches routes (unknown batches, an unreachable server)."""

from __future__ import annotations

import json
import re

import pytest
from omnistory_testkit import BatchFate, FakeServer

from omnistory_core.engine.failures import should_recompute
from omnistory_core.kit.batches import (
    BATCH_DISCOUNT,
    BatchLedger,
    BatchSettings,
    OpenAIBatches,
    custom_id,
    public_url,
    retrying,
    run_batches,
)
from omnistory_core.kit.planning.usage import parse_price_table, usage_record
from omnistory_core.kit.retry import RetryPolicy, classify_api_error

openai = pytest.importorskip("openai")

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": 0}


def test_custom_id_is_deterministic_and_fits_both_providers():
    cid = custom_id(BODY)
    assert cid == custom_id(dict(reversed(list(BODY.items()))))  # key order does not matter
    assert cid != custom_id({**BODY, "seed": 1})
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", cid)  # OpenAI's and Anthropic's rule


def test_ledger_entries_are_files_scoped_to_provider_and_server(tmp_path):
    ledger = BatchLedger(tmp_path, "planner-gpt", provider="openai", endpoint="http://h:1/v1/")
    ledger.put(["a" * 64, "b" * 64], "batch_1")
    path = tmp_path / "batches" / "planner-gpt" / "aa" / f"{'a' * 64}.json"
    entry = json.loads(path.read_text())
    assert entry["batch_id"] == "batch_1" and entry["endpoint"] == "http://h:1/v1"
    assert not list(path.parent.glob(".*.tmp"))  # written by rename: no temp file left
    assert ledger.get("a" * 64) == "batch_1"
    other_server = BatchLedger(tmp_path, "planner-gpt", provider="openai", endpoint="http://x/v1")
    other_provider = BatchLedger(
        tmp_path, "planner-gpt", provider="anthropic", endpoint="http://h:1/v1"
    )
    assert other_server.get("a" * 64) is None and other_provider.get("a" * 64) is None
    ledger.remove(["a" * 64])
    assert ledger.get("a" * 64) is None and not path.parent.exists()
    assert [e["custom_id"] for e in ledger.entries()] == ["b" * 64]
    memory = BatchLedger(None, "planner-gpt", provider="openai", endpoint="")
    memory.put(["c"], "batch_2")
    assert memory.get("c") == "batch_2" and not (tmp_path / "batches" / "c").exists()


def test_public_url_drops_credentials():
    assert public_url("https://user:secret@proxy.example/v1/") == "https://proxy.example/v1"


def test_usage_of_a_batch_call_is_half_price_and_says_so():
    prices = parse_price_table({"m": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}})
    full = usage_record("m", 1000, 50, prices)
    half = usage_record("m", 1000, 50, prices, batch_id="batch_9")
    assert half["cost_usd"] == pytest.approx(full["cost_usd"] * BATCH_DISCOUNT)
    assert (half["batch"], half["batch_id"], half["batch_calls"]) == (True, "batch_9", 1)
    assert "batch" not in full


def test_batch_pending_failures_are_recomputed_by_default():
    failure = {"category": "batch_pending", "message": "batch b had not ended"}
    assert should_recompute(failure, "errors") and not should_recompute(failure, "none")


def _loop(server, ledger, ids, **settings):
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0, timeout=5)
    bodies = {custom_id({**BODY, "n": n}): {**BODY, "n": n} for n in ids}
    call = retrying(
        lambda exc: classify_api_error(exc, connection_types=(openai.APIConnectionError,)),
        RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.01),
    )
    outcomes = run_batches(
        OpenAIBatches(),
        client,
        list(bodies),
        bodies.__getitem__,
        ledger,
        BatchSettings(poll_s=0.01, **settings),
        call=call,
        label="test",
    )
    client.close()
    return [outcomes[cid] for cid in bodies]


def test_a_batch_the_server_does_not_know_falls_back(tmp_path):
    with FakeServer() as server:
        ledger = BatchLedger(tmp_path, "t", provider="openai", endpoint=server.openai_base_url)
        ledger.put([custom_id({**BODY, "n": 0})], "batch_gone")
        gone, fresh = _loop(server, ledger, [0, 1])
        assert (gone.status, fresh.status) == ("fallback", "ok")
        assert "not found" in gone.reason and ledger.entries() == []
        assert server.batch_creations() == 1 and len(server.batch_lines()) == 1


def test_an_unreachable_server_keeps_the_ledger_for_the_next_run(tmp_path):
    with FakeServer() as server:
        server.script_batch(BatchFate("pending"))
        ledger = BatchLedger(tmp_path, "t", provider="openai", endpoint=server.openai_base_url)
        [pending] = _loop(server, ledger, [0], wait_s=0.0)
        assert pending.status == "pending" and "batch_wait_s=0" in pending.reason
    # the server is gone: polling fails after its retries, the entry stays for the next run
    [lost] = _loop(server, ledger, [0])
    assert lost.status == "error" and lost.category == "model_error"
    assert "next run polls it again" in lost.reason
    assert [e["batch_id"] for e in ledger.entries()] == [pending.batch_id]


def test_fake_server_batches_parse_in_the_sdk_through_every_status():
    with FakeServer(batch_polls=4) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0)
        line = {"custom_id": "x", "method": "POST", "url": "/v1/chat/completions", "body": BODY}
        upload = client.files.create(file=("in.jsonl", json.dumps(line).encode()), purpose="batch")
        assert upload.purpose == "batch" and upload.bytes > 0
        made = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        statuses = [client.batches.retrieve(made.id).status for _ in range(4)]
        assert statuses == ["validating", "in_progress", "finalizing", "completed"]
        done = client.batches.retrieve(made.id)
        assert done.request_counts is not None and done.request_counts.completed == 1
        assert done.output_file_id is not None and done.error_file_id is None
        [out] = client.files.content(done.output_file_id).text.splitlines()
        assert json.loads(out)["response"]["status_code"] == 200

        server.script_batch(BatchFate("failed", message="bad line 1"))
        failed = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert failed.status == "failed" and failed.errors and failed.errors.data
        assert failed.errors.data[0].message == "bad line 1"

        server.script_batch(BatchFate("pending"))
        cancelled = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        client.batches.cancel(cancelled.id)
        after = client.batches.retrieve(cancelled.id)
        assert after.status == "cancelled" and after.error_file_id is not None
        [line_out] = client.files.content(after.error_file_id).text.splitlines()
        assert json.loads(line_out)["error"]["code"] == "batch_cancelled"
        assert server.batch_creations() == 3
        client.close()
