"""A hosted judge with batch=true: the OpenAI Batch API through the real SDK against the local
server, in process and through ``python -m omnistory_core evaluate``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omnistory_eval.judges import CRITERIA
from omnistory_eval.judges.judge import HostedTextJudge, Qwen3TextJudge
from omnistory_testing import copy_run, run_cli
from omnistory_testkit import BatchFate, FakeServer, Reply, files_containing

from omnistory_core.kit.batches import BatchLedger, custom_id
from omnistory_core.scores import read_scores

pytest.importorskip("openai")

KEY_VAR = "OMNI_JUDGE_BATCH_CANARY"
KEY = "sk-canary-judge-batch-93b1"
JUDGE = "text-hosted"
ANSWER = json.dumps({c: {"score": 7, "rationale": "fine"} for c in CRITERIA["text"]})


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)


@pytest.fixture
def server():
    with FakeServer(lambda body: Reply(text=ANSWER), usage=(300, 40)) as srv:
        yield srv


def judge(server, store: Path, **params) -> HostedTextJudge:
    j = HostedTextJudge(
        **{
            "base_url": server.openai_base_url,
            "model": "gpt-x",
            "api_key_env": KEY_VAR,
            "batch": True,
            "batch_poll_s": 0.01,
            "max_retries": 1,
            "repair": False,
            **params,
        }
    )
    j.bind_store(store)  # what the evaluation runner's stage does
    return j


def items(item: dict, n: int = 3) -> list[dict]:
    return [dict(item, candidate_text=f"candidate {i}") for i in range(n)]


def entries(server, store: Path) -> list:
    ledger = BatchLedger(store, f"judge-{JUDGE}", provider="openai", endpoint=server.base_url)
    return ledger.entries()


def test_batch_results_fallback_and_records(server, item, tmp_path):
    server.script("chat", Reply(text=ANSWER), Reply(status=503, message="busy"))
    j = judge(server, tmp_path)
    assert j.batch_size >= 1000
    results = j.run_batch(items(item))
    assert [r.status for r in results] == ["ok"] * 3
    [create] = server.requests_for("batches")
    assert create.body["endpoint"] == "/v1/chat/completions"
    [batch] = server.batches.values()
    assert all(body["model"] == "gpt-x" and "messages" in body for _, body in batch.lines)
    assert "repetition_penalty" not in batch.lines[0][1]  # the hosted request, as sent alone
    [sync] = server.requests_for("chat")  # only the errored line went the synchronous way
    assert custom_id(sync.body) == batch.lines[1][0]
    usage = [r.detail["usage"] for r in results]
    assert [u.get("batch", False) for u in usage] == [True, False, True]
    assert usage[0]["batch_id"] == batch.id and usage[1]["batch_fallback_calls"] == 1
    assert entries(server, tmp_path) == []
    j.unload()


def test_pending_batch_is_an_error_row_and_a_rerun_collects_it(server, item, tmp_path):
    server.script_batch(BatchFate("pending"))
    first = judge(server, tmp_path, batch_wait_s=0).run_batch(items(item))
    assert [r.status for r in first] == ["error"] * 3  # never stored: recomputed next run
    assert {r.detail["error_kind"] for r in first} == {"batch_pending"}
    assert len(entries(server, tmp_path)) == 3
    server.end_batches()
    again = judge(server, tmp_path).run_batch(items(item))
    assert [r.status for r in again] == ["ok"] * 3
    assert server.batch_creations() == 1 and server.requests_for("chat") == []


def test_failed_batch_falls_back(server, item, tmp_path):
    server.script_batch(BatchFate("failed"))
    results = judge(server, tmp_path).run_batch(items(item))
    assert [r.status for r in results] == ["ok"] * 3
    assert len(server.requests_for("chat")) == 3


def test_batch_needs_the_openai_backend():
    judge = Qwen3TextJudge(batch=True, repair=False)  # vllm: refused before anything is scored
    [need] = [n for n in judge.preflight_needs() if n.check == "config"]
    assert need.target == "judge.text-qwen3-30b-a3b.batch" and "backend=openai" in need.detail
    with pytest.raises(ValueError, match="batch=true needs backend=openai"):
        judge.load()


def test_evaluate_command_judges_through_a_batch(tmp_path):
    """The first evaluate stops waiting at once (batch_wait_s=0): error rows, the ids in the
    store's ledger; the second polls them, creates no batch and scores every row."""
    job = copy_run(tmp_path)
    ledger_dir = tmp_path / "out/store/batches" / f"judge-{JUDGE}"
    with FakeServer(lambda body: Reply(text=ANSWER), batch_polls=2) as srv:
        srv.script_batch(BatchFate("pending"))
        sets = {
            "base_url": srv.openai_base_url,
            "model": "gpt-x",
            "api_key_env": KEY_VAR,
            "batch": "true",
            "batch_poll_s": "0.05",
            "repair": "false",
        }
        args = ["evaluate", str(job), "--metrics", "", "--judges", JUDGE, "--no-report"]
        for k, v in sets.items():
            args += ["--set", f"judge.{JUDGE}.{k}={v}"]
        first = run_cli(
            *args,
            "--set",
            f"judge.{JUDGE}.batch_wait_s=0",
            "--no-progress",
            cwd=tmp_path,
            env={KEY_VAR: KEY},
        )
        assert first.returncode == 1, first.stderr[-3000:]  # errors remain: exit 1
        assert {r.status for r in read_scores(job / "scores.jsonl")} == {"error"}
        assert len(list(ledger_dir.glob("*/*.json"))) == 2  # the judge got the store's root

        srv.end_batches()
        proc = run_cli(*args, "--no-progress", cwd=tmp_path, env={KEY_VAR: KEY})
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert srv.batch_creations() == 1 and srv.requests_for("chat") == []
        [batch] = srv.batches.values()
        assert len(batch.lines) == 2
    rows = list(read_scores(job / "scores.jsonl"))
    assert len(rows) == 2 * 4 and {r.status for r in rows} == {"ok"}
    audit = [json.loads(x) for x in (job / f"audit/judge-{JUDGE}.jsonl").read_text().splitlines()]
    assert {a["detail"]["usage"]["batch_id"] for a in audit} == {batch.id}
    assert list(ledger_dir.glob("*/*.json")) == []
    assert files_containing(str(tmp_path / "out"), KEY) == []
    assert KEY not in first.stderr + proc.stderr + proc.stdout
