"""An evaluator that cannot answer gives `error` rows, never a score: through the real CLI.

Judges talk to a local OpenAI-compatible server (LocalChatServer) that is failing, absent, or up.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import socket
import threading
from pathlib import Path

import pandas as pd
import pytest
from omnistory_eval.judges import CRITERIA
from omnistory_testing import copy_run, run_cli
from omnistory_testkit import LocalChatServer, Reply

from omnistory_core.scores import read_scores

JUDGE = "text-qwen3-30b-a3b"
N = 4


def _answer(body: dict) -> str:
    """A valid answer whose scores depend on the request, so examples score differently."""
    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).digest()
    scores = [3 + digest[i] % 6 for i in range(4)]
    return json.dumps(
        {c: {"score": s, "rationale": "ok"} for c, s in zip(CRITERIA["text"], scores, strict=True)}
    )


class Switchable:
    """A responder that answers 503 while down (or for its first ``fail_first`` requests)."""

    def __init__(self, up: bool = True, fail_first: int = 0):
        self.up = up
        self.fail_first = fail_first
        self.lock = threading.Lock()
        self.seen = 0

    def __call__(self, body: dict) -> Reply:
        with self.lock:
            self.seen += 1
            failing = not self.up or self.seen <= self.fail_first
        if failing:
            return Reply(status=503, error_message="model is loading")
        return Reply(content=_answer(body))


def _sweep(work: Path) -> Path:
    """Two systems that share every narration (copy planner, two image experts)."""
    gen = run_cli(
        "-m",
        "planner=copy",
        "image=copy,noop",
        f"dataset.limit={N}",
        "output_root=out",
        "engine.progress=false",
        "evaluation.report=false",
        cwd=work,
    )
    assert gen.returncode == 0, gen.stderr
    return work / "out/sweeps/demo"


def _evaluate(run_dir: Path, base_url: str, *extra: str, env: dict | None = None):
    return run_cli(
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
        f"judge.{JUDGE}.base_url={base_url}",
        "--set",
        f"judge.{JUDGE}.model=local-judge",
        "--set",
        f"judge.{JUDGE}.max_retries=0",
        "--set",
        f"judge.{JUDGE}.repair=false",
        *extra,
        cwd=run_dir.parent.parent.parent,
        # wide enough that the pre-flight table never folds a URL, whatever its port's length
        env={"COLUMNS": "300", **(env or {})},
    )


def _statuses(run_dir: Path) -> list[str]:
    return sorted({r.status for r in read_scores(run_dir / "scores.jsonl")})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_failing_judge_gives_error_rows_then_ok_rows_without_any_flag(tmp_path: Path) -> None:
    run_dir = _sweep(tmp_path)
    responder = Switchable(up=False)
    with LocalChatServer(responder) as server:
        first = _evaluate(run_dir, server.base_url, "--no-report")
        assert first.returncode == 1, first.stderr
        rows = list(read_scores(run_dir / "scores.jsonl"))
        assert len(rows) == 2 * N * 4 and {r.status for r in rows} == {"error"}
        assert all(r.score is None and "503" in (r.cause or "") for r in rows)
        assert "error" in first.stdout and "'error' row(s)" in first.stderr
        # nothing was stored as a result: the store holds no record of the judge
        stored = [json.loads(p.read_text()) for p in (tmp_path / "out/store").rglob("*.json")]
        assert stored and not [r for r in stored if r.get("component") == f"judge/{JUDGE}"]
        failed_requests = len(server.requests)
        assert failed_requests == N  # shared narrations: one request per distinct item

        responder.up = True
        second = _evaluate(run_dir, server.base_url, "--no-report")  # the same command
        assert second.returncode == 0, second.stderr
        assert len(server.requests) == failed_requests + N  # every error was recomputed
        assert _statuses(run_dir) == ["ok"]

        third = _evaluate(run_dir, server.base_url, "--no-report")
        assert third.returncode == 0 and len(server.requests) == failed_requests + N  # cached


def test_unreachable_server_stops_at_preflight_or_gives_error_rows(tmp_path: Path) -> None:
    run_dir = _sweep(tmp_path)
    port = _free_port()  # nothing listens there yet
    base_url = f"http://127.0.0.1:{port}/v1"

    stopped = _evaluate(run_dir, base_url, "--no-report")
    assert stopped.returncode == 2, stopped.stderr
    assert "cannot run here" in stopped.stderr and base_url in stopped.stderr
    assert "not reachable" in stopped.stderr and "start the server" in stopped.stderr
    assert not (run_dir / "scores.jsonl").exists()  # nothing scored

    partial = _evaluate(run_dir, base_url, "--no-report", "--allow-partial")
    assert partial.returncode == 1, partial.stderr
    rows = list(read_scores(run_dir / "scores.jsonl"))
    assert {r.status for r in rows} == {"error"} and "not reachable" in (rows[0].cause or "")

    with LocalChatServer(Switchable(), port=port) as server:
        up = _evaluate(run_dir, base_url, "--no-report")  # no flag
        assert up.returncode == 0, up.stderr
        assert len(server.requests) == N
    assert _statuses(run_dir) == ["ok"]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_package_and_weights_give_one_preflight_table(tmp_path: Path) -> None:
    run_dir = _sweep(tmp_path)
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home"), "COLUMNS": "400"}
    proc = run_cli(
        "evaluate",
        str(run_dir),
        "--metrics",
        "clip",
        "--judges",
        JUDGE,  # the paper's backend: vllm offline, not installed here
        "--no-progress",
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    err = " ".join(proc.stderr.split())
    for expected in (
        "Evaluators that cannot run here",
        f"judge/{JUDGE}",
        "vllm",
        "not installed",
        "pip install vllm",
        "Qwen/Qwen3-30B-A3B-Instruct-2507",
        "metric/clip",
        "openai/clip-vit-base-patch32",
        "HF_HUB_OFFLINE is set",
        "prefetch metric=clip",
    ):
        assert expected in err, expected
    assert not (run_dir / "scores.jsonl").exists()


def _leaderboard(run_dir: Path) -> pd.DataFrame:
    lb = pd.read_csv(run_dir / "report/leaderboard.csv").set_index("system").sort_index()
    return lb[["judge_text", "judge_text_zero", "total", "total_zero", "errors_judge_text"]]


@pytest.mark.slow(seconds=20)
def test_numbers_do_not_depend_on_an_earlier_failed_run(tmp_path: Path) -> None:
    clean, retried = tmp_path / "clean", tmp_path / "retried"
    clean.mkdir()
    retried.mkdir()
    clean_dir, retried_dir = _sweep(clean), _sweep(retried)
    with LocalChatServer(Switchable()) as server:
        assert _evaluate(clean_dir, server.base_url).returncode == 0
    expected = _leaderboard(clean_dir)
    assert (expected["errors_judge_text"] == 0).all()

    # first attempt: two of the four items fail
    with LocalChatServer(Switchable(fail_first=2)) as server:
        first = _evaluate(retried_dir, server.base_url)
        assert first.returncode == 1, first.stderr
    partial = _leaderboard(retried_dir)
    assert (partial["errors_judge_text"] == 2).all()
    scores = [r for r in read_scores(retried_dir / "scores.jsonl") if r.status == "ok"]
    for system, lb_row in partial.iterrows():
        mine = [r.score for r in scores if r.system == system]
        answered_mean = sum(mine) / len(mine)  # the two answered examples, four criteria each
        # zero-filled leaves the erred examples out instead of counting them as zeros
        assert lb_row["judge_text_zero"] == pytest.approx(answered_mean)
        assert lb_row["judge_text"] == pytest.approx(answered_mean)
    md = (retried_dir / "report/leaderboard.md").read_text()
    assert "†" in md and "could not answer" in md
    coverage = pd.read_csv(retried_dir / "report/tables/judge_coverage.csv")
    assert (coverage["n_error"] == 2).all() and (coverage["n_valid"] == 2).all()

    with LocalChatServer(Switchable()) as server:
        again = _evaluate(retried_dir, server.base_url)
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == 2  # only the two errors
    pd.testing.assert_frame_equal(_leaderboard(retried_dir), expected)
    assert "†" not in (retried_dir / "report/leaderboard.md").read_text()


def test_metric_that_fails_to_load_gives_error_rows_and_is_retried(tmp_path: Path) -> None:
    job = copy_run(tmp_path)
    broken = tmp_path / "broken-clip"  # a local checkpoint directory without its files
    broken.mkdir()
    args = [
        "evaluate",
        str(job),
        "--metrics",
        "clip",
        "--no-report",
        "--no-progress",
        "--set",
        f"metric.clip.model={broken}",
    ]
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}
    for _ in range(2):  # not cached: the second run tries again and says so again
        proc = run_cli(*args, cwd=tmp_path, env=env)
        assert proc.returncode == 1, proc.stderr
        assert "metric/clip" in proc.stderr and "recomputed next run" in proc.stderr
        rows = list(read_scores(job / "scores.jsonl"))
        assert len(rows) == 2 and {(r.status, r.score) for r in rows} == {("error", None)}
        assert all(str(broken) in (r.cause or "") for r in rows)


def test_offline_hub_makes_metrics_error_rows_with_allow_partial(tmp_path: Path) -> None:
    job = copy_run(tmp_path)
    # no offline variable: the hub endpoint is simply unreachable (and reached without a proxy,
    # which would answer for it)
    env = {
        "HF_HUB_OFFLINE": "",
        "TRANSFORMERS_OFFLINE": "",
        "HF_HOME": str(tmp_path / "empty-hf-home"),
        "HF_ENDPOINT": f"http://127.0.0.1:{_free_port()}",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    proc = run_cli(
        "evaluate",
        str(job),
        "--metrics",
        "bertscore,clip",
        "--no-report",
        "--no-progress",
        "--allow-partial",
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr
    rows = list(read_scores(job / "scores.jsonl"))
    assert {r.status for r in rows} == {"error"}
    assert all("unreachable" in (r.cause or "") for r in rows), [r.cause for r in rows]
    summary = " ".join(proc.stdout.split())
    assert "metric/bertscore" in summary and "metric/clip" in summary


def test_end_of_sweep_evaluation_runs_the_preflight_too(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home"), "COLUMNS": "300"}
    common = [
        "-m",
        "planner=copy",
        "image=copy",
        "dataset.limit=2",
        "engine.progress=false",
        "evaluation.metrics=[clip]",
    ]
    stopped = run_cli(*common, "output_root=a", cwd=tmp_path, env=env)
    assert stopped.returncode == 2, stopped.stderr
    assert "openai/clip-vit-base-patch32" in stopped.stderr
    assert (tmp_path / "a/sweeps/demo/report/index.html").exists()  # outputs are still shown
    assert not (tmp_path / "a/sweeps/demo/scores.jsonl").exists()

    partial = run_cli(
        *common, "evaluation.allow_partial=true", "output_root=b", cwd=tmp_path, env=env
    )
    assert partial.returncode == 1, partial.stderr
    rows = list(read_scores(tmp_path / "b/sweeps/demo/scores.jsonl"))
    assert rows and {r.status for r in rows} == {"error"}
