"""A real CLI run of planner=gpt against the local server: outputs, failures, usage, no key leak."""

from __future__ import annotations

import json
from pathlib import Path

from omnistory_testkit import FakeServer, Reply, files_containing, run_cli

KEY_VAR = "OMNI_GPT_CLI_CANARY"  # not secret-looking, so no scrubber can hide a leak
KEY = "sk-canary-cli-0a9b8c7d6e5f"


def test_cli_run_records_plans_failures_usage_and_never_the_key(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with FakeServer(usage=(1000, 50)) as srv:
        # max_concurrency=1 makes the order fixed: item 0 gets a 429 then a plan, item 1 junk
        srv.script("chat", Reply.rate_limited("1"), Reply(), Reply(text="{not json"))
        proc = run_cli(
            "planner=gpt",
            f"planner.base_url={srv.openai_base_url}",
            f"planner.api_key_env={KEY_VAR}",
            "planner.max_concurrency=1",
            "planner.prices={gpt-5.4:{input_per_mtok:2,output_per_mtok:8}}",
            "dataset.limit=2",
            f"output_root={out}",
            "engine.progress=false",
            cwd=str(tmp_path),
            env={KEY_VAR: KEY},
        )
        requests = srv.requests_for("chat")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(requests) == 3
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in requests)  # key was used

    job = out / "runs" / "demo" / "gpt-copy-espeak"
    plans = [json.loads(line) for line in (job / "plans.jsonl").read_text().splitlines()]
    assert plans[0]["plan"] is not None and plans[0]["failure"] is None
    assert plans[0]["usage"]["attempts"] == 2 and plans[0]["usage"]["retry_wait_s"] == 1.0
    assert [(p["usage"]["input_tokens"], p["usage"]["output_tokens"]) for p in plans] == [
        (1000, 50)
    ] * 2
    assert plans[1]["raw"] == "{not json"
    assert plans[1]["failure"]["category"] == "plan_json_error"
    assert (job / "text" / "0" / "generated.txt").read_text() == plans[0]["plan"]["narration"]
    assert "1\ttext\tplan_json_error" in (job / "missing.txt").read_text()

    manifest = json.loads((job / "manifest.json").read_text())
    usage = manifest["usage"]["planner"]
    # (token sums are in the manifest too, but its secret scrubber currently masks every key
    # containing "token"; see the report)
    assert usage["calls"] == 2 and usage["priced_calls"] == 2
    assert abs(usage["cost_usd"] - 2 * (1000 * 2 + 50 * 8) / 1e6) < 1e-12
    assert manifest["config"]["planner"]["api_key_env"] == KEY_VAR

    assert files_containing(str(out), KEY) == []
    assert KEY not in proc.stdout and KEY not in proc.stderr
