"""A judge served over the OpenAI protocol repairs its JSON through the same endpoint unless told
otherwise; a repair model that cannot run here is one pre-flight warning, not a blocker, and the
answers needing it stay ``error`` (``evaluate`` through the CLI, a local server, the real SDK)."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import pytest
from omnistory_eval.judges import CRITERIA
from omnistory_eval.judges.judge import Qwen3TextJudge
from omnistory_eval.judges.prompts import REPAIR_SYSTEM
from omnistory_testing import copy_run
from omnistory_testkit import LocalChatServer, Reply, run_cli

from omnistory_core.scores import read_scores

pytest.importorskip("openai")

JUDGE = "text-qwen3-30b-a3b"
SCORES = (8, 7, 6, 9)
# unparseable as it is (prose), with every score beside its key: what the repair may fix
MALFORMED = (
    "alignment_with_metadata: 8 (fits the fable); natural flow from current narration: 7"
    " (clear); satisfaction of generation conditions = 6 since the goal is met; semantic"
    " consistency with ground truth: 9 - right speaker"
)
REPAIRED = json.dumps(
    {k: {"score": s, "rationale": "r"} for k, s in zip(CRITERIA["text"], SCORES, strict=True)}
)
VALID = json.dumps({k: {"score": 5, "rationale": "ok"} for k in CRITERIA["text"]})


class Judged:
    """The server's side: the judge's first answer is valid, the others malformed; the repair
    prompt gets the repaired JSON."""

    def __init__(self) -> None:
        self.judge_calls = itertools.count()
        self.repair_models: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        if body["messages"][0].get("content") == REPAIR_SYSTEM:
            with self.lock:
                self.repair_models.append(body["model"])
            return Reply(content=REPAIRED)
        with self.lock:
            first = next(self.judge_calls) == 0
        return Reply(content=VALID if first else MALFORMED)


def _evaluate(job: Path, server: LocalChatServer, *extra: str, env: dict | None = None):
    return run_cli(
        "evaluate", str(job), "--metrics", "", "--judges", JUDGE, "--no-progress", "--no-report",
        "--set", f"judge.{JUDGE}.backend=openai",
        "--set", f"judge.{JUDGE}.base_url={server.base_url}",
        "--set", f"judge.{JUDGE}.model=local-judge",
        *extra, cwd=job.parent, env=env,
    )  # fmt: skip


def _statuses(job: Path) -> list[str]:
    """Per example, the set of its rows' statuses (sorted)."""
    by_example: dict[str, set[str]] = {}
    for row in read_scores(job / "scores.jsonl"):
        by_example.setdefault(row.example_id, set()).add(row.status)
    return sorted("+".join(sorted(s)) for s in by_example.values())


def test_an_openai_judge_repairs_through_its_own_server_by_default(tmp_path: Path) -> None:
    job = copy_run(tmp_path)
    judged = Judged()
    with LocalChatServer(judged) as server:
        proc = _evaluate(job, server)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    assert judged.repair_models == ["local-judge"]  # the judge's own served model repaired it
    assert _statuses(job) == ["ok", "ok"]
    audit = [json.loads(x) for x in (job / f"audit/judge-{JUDGE}.jsonl").read_text().splitlines()]
    repaired = [a for a in audit if a["detail"]["repair_status"] == "succeeded"]
    assert len(repaired) == 1, audit
    assert repaired[0]["scores"] == dict(zip(CRITERIA["text"], map(float, SCORES), strict=True))
    assert repaired[0]["detail"]["repair"]["model"] == "Qwen/Qwen3-30B-A3B-Instruct-2507"


def test_an_unavailable_repair_model_is_one_warning_and_its_answers_stay_error(
    tmp_path: Path,
) -> None:
    job = copy_run(tmp_path)
    judged = Judged()
    with LocalChatServer(judged) as server:
        # the paper's local repair model: vLLM is not installed here, its weights not cached
        proc = _evaluate(
            job, server, "--set", f"judge.{JUDGE}.repair.backend=vllm", env={"HF_HUB_OFFLINE": "1"}
        )
        n_requests = len(server.requests)
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line.lower()]
    assert len(warnings) == 1, proc.stderr
    assert f"judge/{JUDGE}: its JSON repair model cannot run here" in warnings[0]
    assert "package vllm: not installed" in warnings[0]
    assert proc.returncode == 1, proc.stderr  # evaluation ran; 'error' rows remain
    assert n_requests == 2 and not judged.repair_models  # two judge calls, no repair attempted
    assert _statuses(job) == ["error", "ok"]
    errors = [r for r in read_scores(job / "scores.jsonl") if r.status == "error"]
    assert len(errors) == len(CRITERIA["text"])
    assert all("JSON repair model unavailable" in (r.cause or "") for r in errors), errors


def test_repair_options_follow_the_judge_unless_set() -> None:
    url = "http://127.0.0.1:9/v1"
    served = Qwen3TextJudge(backend="openai", base_url=url, model="m", api_key_env="K")
    options = served.params["repair"]
    assert (options["backend"], options["base_url"], options["model"]) == ("openai", url, "m")
    assert options["api_key_env"] == "K" and options["checkpoint"] == Qwen3TextJudge.spec.checkpoint
    # one repair.* key overrides that key only; an explicit backend is taken as given
    other = Qwen3TextJudge(backend="openai", base_url=url, repair={"model": "fixer"})
    assert (other.params["repair"]["base_url"], other.params["repair"]["model"]) == (url, "fixer")
    given = Qwen3TextJudge(backend="openai", base_url=url, repair={"backend": "openai"})
    assert given.params["repair"].get("base_url") is None  # the config error pre-flight names
    assert Qwen3TextJudge().params["repair"]["backend"] == "vllm"  # the paper's, on vLLM
