"""Evaluation on devices: metric and judge stages run on replicas spread over the devices of
``engine.devices`` (processes standing in for GPUs), evaluator-major over the whole sweep.

A sweep of stand-ins (``make_standin_site(..., evaluators=True)``: every model, metric and judge
replaced by a deterministic twin that logs its calls and loads) is scored in this process and on
one and three stand-in devices: the scores table is byte-identical, no evaluator call is made
twice, each evaluator is loaded at most once per device, the calls of a stage spread over several
devices, and a tensor-parallel judge gets two devices per replica.  The end-of-sweep evaluation
uses the sweep's devices.  A judge's JSON repair model runs as a stage on a replica too."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections import Counter
from pathlib import Path

import pytest
from omnistory_testkit import run_cli
from omnistory_testkit.standins import make_standin_site

LIMIT = 3
GRID = ("-m", "planner=claude", "image=kontext,dev", "tts=parler,voxcpm")
QUIET = ("output_root=out", "sweep_name=s", "engine.progress=false", "evaluation.report=false")
METRICS = ("bertscore", "clip", "speech_meta")
JUDGE = "text-qwen3-30b-a3b"
#: one item per chunk, so that a stage of a handful of items still spreads over the devices
ONE_PER_CHUNK = tuple(
    arg
    for key in (*(f"metric.{m}" for m in METRICS), f"judge.{JUDGE}")
    for arg in ("--set", f"{key}.batch_size=1")
)
EVALUATORS = ("--metrics", ",".join(METRICS), "--judges", JUDGE, *ONE_PER_CHUNK)


def _env(root: Path, site: Path, delay: float = 0.0) -> dict[str, str]:
    return {
        "PYTHONPATH": str(site),
        "ANTHROPIC_API_KEY": "test-key",
        "OMNISTORY_STANDIN_DELAY_S": str(delay),
        "OMNISTORY_STANDIN_LOG": str(root / "calls.jsonl"),
        "OMNISTORY_STANDIN_LOAD_LOG": str(root / "loads.jsonl"),
        "OMNISTORY_DEVICE_LOCKS": str(root / "device-locks"),
    }


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _evaluator_lines(path: Path) -> list[dict]:
    return [e for e in _lines(path) if e["component"].split("/")[0] in ("metric", "judge")]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return make_standin_site(tmp_path_factory.mktemp("standins"), evaluators=True)


@pytest.fixture(scope="module")
def generated(tmp_path_factory, site: Path) -> Path:
    """The 4-system grid on 3 demo examples, generated in one process: the directory to copy."""
    root = tmp_path_factory.mktemp("generated")
    proc = run_cli(
        *GRID, f"dataset.limit={LIMIT}", *QUIET, "engine.devices=none",
        cwd=root, env=_env(root, site),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


def _evaluate(generated: Path, site: Path, where: Path, devices: str, *extra: str, delay=0.0):
    """``evaluate`` on a fresh copy of the generated sweep (its own store: nothing scored yet)."""
    shutil.copytree(generated / "out", where / "out")
    return run_cli(
        "evaluate", "out/sweeps/s", "--store", "out/store", *EVALUATORS, "--no-report",
        "--no-progress", f"engine.devices={devices}", *extra,
        cwd=where, env=_env(where, site, delay),
    )  # fmt: skip


@pytest.fixture(scope="module")
def reference(tmp_path_factory, generated: Path, site: Path) -> bytes:
    """The scores table as the evaluation's own process computes every evaluator."""
    where = tmp_path_factory.mktemp("in-process")
    proc = _evaluate(generated, site, where, "none")
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = _evaluator_lines(where / "calls.jsonl")
    assert calls and {c["devices"] for c in calls} == {None}  # no device: this process
    return (where / "out/sweeps/s/scores.jsonl").read_bytes()


def _check_calls(where: Path, devices: set[str]) -> tuple[dict[str, set[str]], Counter]:
    """No evaluator call made twice, each made on one of ``devices``; each evaluator loaded at
    most once per device.  Returns the devices each evaluator's calls ran on, and the loads."""
    calls = _evaluator_lines(where / "calls.jsonl")
    stats = json.loads((where / "out/sweeps/s/evaluation_stats.json").read_text())
    made = sum(c["calls"] for c in stats["components"].values())
    digests = Counter(c["digest"] for c in calls)
    assert len(digests) == made > 0 and max(digests.values()) == 1, "a call was made twice"
    on: dict[str, set[str]] = {}
    for call in calls:
        on.setdefault(call["component"], set()).add(call["devices"])
    assert set(on) == {*(f"metric/{m}" for m in METRICS), f"judge/{JUDGE}"}
    assert all(d <= devices for d in on.values()), on
    loads = Counter((e["component"], e["devices"]) for e in _evaluator_lines(where / "loads.jsonl"))
    assert max(loads.values()) == 1, f"an evaluator loaded twice on a device: {loads}"
    return on, loads


def test_three_devices_score_as_this_process_does_and_spread_each_stage(
    tmp_path: Path, generated: Path, site: Path, reference: bytes
) -> None:
    proc = _evaluate(generated, site, tmp_path, "[0,1,2]", delay=0.2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "out/sweeps/s/scores.jsonl").read_bytes() == reference
    on, loads = _check_calls(tmp_path, {"0", "1", "2"})
    # data parallel: some evaluator's calls ran on several devices (never in this process)
    assert max(len(d) for d in on.values()) >= 2, on
    assert {device for _, device in loads} <= {"0", "1", "2"}


def test_one_device_scores_in_this_process_pinned_to_it(
    tmp_path: Path, generated: Path, site: Path, reference: bytes
) -> None:
    proc = _evaluate(generated, site, tmp_path, "[0]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "out/sweeps/s/scores.jsonl").read_bytes() == reference
    on, loads = _check_calls(tmp_path, {"0"})
    assert sum(loads.values()) == len(on) == 4  # one load per evaluator, as without devices
    pids = {c["pid"] for c in _evaluator_lines(tmp_path / "calls.jsonl")}
    assert len(pids) == 1  # every evaluator in the evaluation's own process


def test_a_tensor_parallel_judge_gets_two_devices_per_replica(
    tmp_path: Path, generated: Path, site: Path, reference: bytes
) -> None:
    wide = ("--set", f"judge.{JUDGE}.tensor_parallel_size=2")
    proc = _evaluate(generated, site, tmp_path / "three", "[0,1,2]", *wide, delay=0.1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # a runtime setting: the same keys, so the same scores
    assert (tmp_path / "three/out/sweeps/s/scores.jsonl").read_bytes() == reference
    on, _ = _check_calls(tmp_path / "three", {"0", "1", "2", "0,1", "0,2", "1,2"})
    assert all("," in d for d in on[f"judge/{JUDGE}"]), on
    assert all("," not in d for c, ds in on.items() if c.startswith("metric/") for d in ds), on

    narrow = _evaluate(generated, site, tmp_path / "one", "[0]", *wide)
    assert narrow.returncode == 2, narrow.stderr[-3000:]
    assert f"judge={JUDGE} needs 2 GPUs at once but engine.devices has 1 (0)" in narrow.stderr
    assert not (tmp_path / "one/out/sweeps/s/scores.jsonl").exists()


def test_the_end_of_sweep_evaluation_scores_on_the_sweeps_devices(
    tmp_path: Path, site: Path, reference: bytes
) -> None:
    evaluation = (
        f"evaluation.metrics=[{','.join(METRICS)}]",
        f"evaluation.judges=[{JUDGE}]",
        "evaluation.overrides=[" + ",".join(f"'{o}'" for o in ONE_PER_CHUNK[1::2]) + "]",
    )
    proc = run_cli(
        *GRID, f"dataset.limit={LIMIT}", *QUIET, *evaluation, "engine.devices=[0,1,2]",
        cwd=tmp_path, env=_env(tmp_path, site, 0.1),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "out/sweeps/s/scores.jsonl").read_bytes() == reference
    on, _ = _check_calls(tmp_path, {"0", "1", "2"})
    # the evaluators ran side by side on the sweep's devices (whether one evaluator's calls
    # spread over several is the sweep's scheduler's choice: only where its share of the work
    # outweighs a load, tests/engine/test_sweep_schedule.py)
    assert len(set().union(*on.values())) >= 2, on


def test_evaluate_reads_engine_options_among_its_positional_arguments() -> None:
    from omnistory_eval.command import EvaluationInputError, split_engine_options

    rest, engine = split_engine_options(
        ["out/sweeps/s", "engine.devices=[0,1]", "dataset.limit=2", "engine.device_locks=/l"]
    )
    assert rest == ["out/sweeps/s", "dataset.limit=2"]
    assert engine == {"devices": [0, 1], "device_locks": "/l"}
    assert split_engine_options(["engine.devices=none"])[1] == {"devices": "none"}
    with pytest.raises(EvaluationInputError, match=r"engine.devices=\[0,: not a YAML value"):
        split_engine_options(["engine.devices=[0,"])


# -- the JSON repair pass on a replica -----------------------------------------------------------
def _repair_run(tmp_path: Path, monkeypatch, devices: object, caplog) -> tuple[bytes, list[str]]:
    """A real judge behind a local OpenAI-protocol server whose every answer needs the repair;
    scored in this process (``devices``: ``none`` or stand-in devices).  The scores table and
    the repair prompts the server saw."""
    from omnistory_eval.command import evaluate_run
    from omnistory_eval.judges import CRITERIA
    from omnistory_eval.judges.prompts import REPAIR_SYSTEM
    from omnistory_testing import copy_run
    from omnistory_testkit import LocalChatServer, Reply

    malformed = (
        "alignment_with_metadata: 8 (fits {}); natural flow from current narration: 7 (clear);"
        " satisfaction of generation conditions = 6; semantic consistency with ground truth: 9"
    )
    scores = zip(CRITERIA["text"], (8, 7, 6, 9), strict=True)
    repaired = json.dumps({k: {"score": s, "rationale": "r"} for k, s in scores})
    repairs: list[str] = []

    def answer(body: dict) -> Reply:
        if body["messages"][0].get("content") == REPAIR_SYSTEM:
            repairs.append(body["model"])
            return Reply(content=repaired)
        # one answer per prompt (an example's own words), so every answer has its own repair
        tag = hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest()[:8]
        return Reply(content=malformed.format(tag))

    tmp_path.mkdir()
    job = copy_run(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # restored after the test (the pool sets it)
    with LocalChatServer(answer) as server, caplog.at_level(logging.INFO, logger="omnistory"):
        run = evaluate_run(
            job,
            metrics=[],
            judges=[JUDGE],
            overrides=[
                f"judge.{JUDGE}.backend=openai",
                f"judge.{JUDGE}.base_url={server.base_url}",
                f"judge.{JUDGE}.model=local-judge",
            ],
            progress_enabled=False,
            engine={"devices": devices, "device_locks": str(tmp_path / "device-locks")},
        )
    assert run.errors == 0 and {r.status for r in run.rows} == {"ok"}, run.rows
    return run.scores_path.read_bytes(), repairs


def test_the_json_repair_model_runs_as_a_stage_on_a_replica(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    pytest.importorskip("openai")
    here, here_repairs = _repair_run(tmp_path / "here", monkeypatch, "none", caplog)
    assert "/repair: replica" not in caplog.text
    caplog.clear()
    there, there_repairs = _repair_run(tmp_path / "there", monkeypatch, [0, 1, 2], caplog)
    assert there == here  # byte-identical scores, repaired answers included
    assert here_repairs == there_repairs == ["local-judge", "local-judge"]
    assert f"judge/{JUDGE}: replica 1 on device(s)" in caplog.text
    assert f"judge/{JUDGE}/repair: replica 1 on device(s)" in caplog.text
    store = tmp_path / "there/out/store/calls"
    owners = Counter(json.loads(p.read_text())["component"] for p in store.rglob("*.json"))
    assert owners[f"judge/{JUDGE}/repair"] == 2  # one call per answer, under its own key
