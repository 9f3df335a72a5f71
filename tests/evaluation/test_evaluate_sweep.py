"""`evaluate RUN_DIR` over a real demo sweep: judges through the OpenAI-compatible backend against a
local server, evaluator-major dedupe across systems, statuses in the scores table, resumability."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

from omnistory_eval.judges import CRITERIA
from omnistory_testing import copy_run, run_cli
from omnistory_testkit import LocalChatServer, Reply

from omnistory_core.scores import read_scores

N = 4
JUDGE = "text-qwen3-30b-a3b"


def _answer(scores: list[int]) -> str:
    return json.dumps(
        {
            c: {"score": s, "rationale": "fine"}
            for c, s in zip(CRITERIA["text"], scores, strict=True)
        }
    )


REPLIES = [
    _answer([7, 8, 6, 5]),  # valid
    "```json\n" + _answer([6, 6, 6, 6]) + "\n```",  # fenced
    "Here is my evaluation:\n" + _answer([5, 5, 4, 3]) + "\nThanks.",  # prose-wrapped
    _answer([7, 8, 11, 5]),  # out of range
    _answer([7, 8, 6, 5])[:40],  # truncated
]


def test_judges_over_a_sweep_land_in_the_scores_table(tmp_path: Path) -> None:
    # two systems that share every narration (copy planner, two image experts)
    gen = run_cli(
        "-m",
        "planner=copy",
        "image=copy,noop",
        f"dataset.limit={N}",
        "output_root=out",
        "engine.progress=false",
        cwd=tmp_path,
    )
    assert gen.returncode == 0, gen.stderr
    run_dir = tmp_path / "out/sweeps/demo"
    # the end-of-sweep report exists even before anything is scored
    assert (run_dir / "report/index.html").exists()

    counter = itertools.count()
    lock = threading.Lock()

    def responder(body):
        with lock:
            n = next(counter)
        return Reply(content=REPLIES[n % len(REPLIES)])

    with LocalChatServer(responder) as server:
        args = [
            "evaluate",
            str(run_dir),
            "--metrics",
            "",
            "--judges",
            JUDGE,
            "--no-progress",
            "--set",
            f"judge.{JUDGE}.backend=openai",
            "--set",
            f"judge.{JUDGE}.base_url={server.base_url}",
            "--set",
            f"judge.{JUDGE}.model=local-judge",
            "--set",
            f"judge.{JUDGE}.repair=false",
        ]
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        first_requests = len(server.requests)
        again = run_cli(*args, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == first_requests  # resumed from the store: no new request

    # evaluator-major dedupe: both systems share their narrations, so N items, not 2N
    assert first_requests == N
    stats = json.loads((run_dir / "evaluation_stats.json").read_text())
    assert stats["naive_items"] == 2 * N
    rows = list(read_scores(run_dir / "scores.jsonl"))
    assert len(rows) == 2 * N * 4  # every (system, example) has its four criterion rows
    assert {r.kind for r in rows} == {"judge"} and {r.track for r in rows} == {"text"}
    by_example: dict[tuple[str, str], set[str]] = {}
    for r in rows:
        by_example.setdefault((r.system, r.example_id), set()).add(r.status)
    statuses = sorted(s for v in by_example.values() for s in v)
    # 4 distinct items got replies 0-3: valid, fenced, prose-wrapped (ok), out-of-range (invalid)
    assert statuses.count("ok") == 2 * 3 and statuses.count("invalid") == 2 * 1
    ok_scores = sorted({r.score for r in rows if r.status == "ok"})
    assert set(ok_scores) <= {3.0, 4.0, 5.0, 6.0, 7.0, 8.0}
    # raw responses, parse status and repairs are kept for audit, one record per (system, example)
    audit = [
        json.loads(x) for x in (run_dir / f"audit/judge-{JUDGE}.jsonl").read_text().splitlines()
    ]
    assert len(audit) == 2 * N and all(a["detail"]["raw_response"] for a in audit)
    assert {a["detail"]["parse_method"] for a in audit} >= {"direct", "normalized"}
    # the report was rebuilt with the judge scores
    assert "judge_text" in (run_dir / "report/leaderboard.csv").read_text().splitlines()[0]


def test_missing_outputs_become_missing_output_rows(tmp_path: Path) -> None:
    job = copy_run(tmp_path)
    records = [json.loads(x) for x in (job / "records.jsonl").read_text().splitlines()]
    records[1]["text"] = {"status": "failure", "category": "model_error", "message": "boom"}
    (job / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with LocalChatServer(lambda body: Reply(content=REPLIES[0])) as server:
        proc = run_cli(
            "evaluate",
            str(job),
            "--metrics",
            "",
            "--judges",
            JUDGE,
            "--no-report",
            "--no-progress",
            "--set",
            f"judge.{JUDGE}.backend=openai",
            "--set",
            f"judge.{JUDGE}.base_url={server.base_url}",
            "--set",
            f"judge.{JUDGE}.repair=false",
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr
        assert len(server.requests) == 1
    rows = list(read_scores(job / "scores.jsonl"))
    status = {(r.example_id.split("/")[-1], r.status) for r in rows}
    assert len(rows) == 8 and len(status) == 2
    assert sorted(s for _, s in status) == ["missing_output", "ok"]


def test_a_judge_in_a_worker_process_scores_like_in_process(tmp_path: Path) -> None:
    import sys

    from omnistory_core.engine.isolation import runner_env_var

    rows = {}
    with LocalChatServer(lambda body: Reply(content=REPLIES[0])) as server:
        for mode, env in (
            ("inproc", {}),
            ("worker", {runner_env_var("judge", JUDGE): sys.executable}),
        ):
            work = tmp_path / mode
            work.mkdir()
            job = copy_run(work)
            proc = run_cli(
                "evaluate",
                str(job),
                "--metrics",
                "",
                "--judges",
                JUDGE,
                "--no-report",
                "--no-progress",
                "--set",
                f"judge.{JUDGE}.backend=openai",
                "--set",
                f"judge.{JUDGE}.base_url={server.base_url}",
                "--set",
                f"judge.{JUDGE}.repair=false",
                cwd=work,
                env=env,
            )
            assert proc.returncode == 0, proc.stderr
            rows[mode] = sorted(
                (r.example_id, r.criterion, r.score, r.status)
                for r in read_scores(job / "scores.jsonl")
            )
    assert rows["inproc"] == rows["worker"] and len(rows["worker"]) == 8


def test_metric_without_weights_is_stopped_before_scoring_and_never_scored(tmp_path: Path) -> None:
    job = copy_run(tmp_path)
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home"), "COLUMNS": "300"}
    args = ["evaluate", str(job), "--metrics", "clip", "--no-report", "--no-progress"]
    proc = run_cli(*args, cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "openai/clip-vit-base-patch32" in proc.stderr and "prefetch metric=clip" in proc.stderr
    assert not (job / "scores.jsonl").exists()
    proc = run_cli(*args, "--allow-partial", cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stderr
    rows = list(read_scores(job / "scores.jsonl"))
    assert len(rows) == 2 and {(r.status, r.score) for r in rows} == {("error", None)}
    assert all("HF_HUB_OFFLINE is set" in (r.cause or "") for r in rows)
