"""``engine.dry_run=true``: the plan of a run or sweep, through the real CLI, against the real run.

The plan's counts are checked against what the run then does (``sweep_stats.json``), on a store
that already holds part of the work, and against the paper-suite counts of test_paper_suites.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from omnistory_testing import run_cli
from omnistory_testkit.standins import make_standin_site

from omnistory_core.engine.dryrun import PlanSettings

QUIET = ("engine.progress=false", "evaluation.report=false", "output_root=out")
GRID = ("planner=template,copy", "image=copy,noop", "tts=espeak,noop")
ROW_KEYS = {"calls", "cached", "loads", "est_cost_usd", "est_gpu_hours"}


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def dry_sweep(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    proc = run_cli(
        "-m", *args, "engine.dry_run=true", "sweep_name=grid", *QUIET, cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "nothing called" in proc.stdout and "total" in proc.stdout  # the table
    return load(tmp_path / "out" / "sweeps" / "grid" / "sweep_plan.json")


def test_grid_plan_matches_the_run_and_a_plan_after_it_is_empty(tmp_path) -> None:
    # part of the work is in the store already: template plans, noop images and espeak speech of
    # the first two examples
    first = run_cli(
        "planner=template", "image=noop", "tts=espeak", "dataset.limit=2", *QUIET, cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr[-3000:]
    calls_in_store = sorted((tmp_path / "out" / "store" / "calls").rglob("*.json"))
    assert len(calls_in_store) == 6

    plan = dry_sweep(tmp_path, *GRID, "dataset.limit=3")
    sweep = tmp_path / "out" / "sweeps" / "grid"
    # nothing ran: no record, no stats, no manifest, nothing new in the store
    assert len(list(sweep.glob("*/dry_run.json"))) == 8
    for name in ("stats.json", "records.jsonl", "manifest.json", "plans.jsonl"):
        assert not list(sweep.glob(f"*/{name}")), name
    assert not (sweep / "sweep_stats.json").exists()
    assert sorted((tmp_path / "out" / "store" / "calls").rglob("*.json")) == calls_in_store

    assert plan["jobs"] == 8
    assert set(plan["components"]) == {
        "planner/template",
        "planner/copy",
        "image/copy",
        "image/noop",
        "tts/espeak",
        "tts/noop",
    }
    assert all(ROW_KEYS <= set(row) for row in plan["components"].values())
    assert {"calls", "est_cost_usd", "est_gpu_hours"} <= set(plan["total"])
    rows = plan["components"]
    # 3 examples; the template planner's first 2 plans and what follows them are cached
    assert (rows["planner/template"]["calls"], rows["planner/template"]["cached"]) == (1, 2)
    assert (rows["planner/copy"]["calls"], rows["planner/copy"]["cached"]) == (3, 0)
    assert rows["image/copy"]["calls"] == 3  # reads the page only: one call per example
    # noop images / espeak: one per distinct plan, 2 planners x 3 examples, 2 of them stored
    assert (rows["image/noop"]["calls"], rows["image/noop"]["cached"]) == (4, 2)
    assert (rows["tts/espeak"]["calls"], rows["tts/espeak"]["cached"]) == (4, 2)
    assert plan["total"]["calls"] == sum(r["calls"] for r in rows.values())
    assert plan["total"]["est_cost_usd"] == 0.0  # no paid API in this grid

    run = run_cli("-m", *GRID, "dataset.limit=3", "sweep_name=grid", *QUIET, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    stats = load(sweep / "sweep_stats.json")["components"]
    assert {k: (v["calls"], v["loads"]) for k, v in stats.items()} == {
        k: (v["calls"], v["loads"]) for k, v in rows.items()
    }

    again = dry_sweep(tmp_path, *GRID, "dataset.limit=3")
    assert again["total"]["calls"] == 0 and again["total"]["loads"] == 0
    assert {k: v["cached"] for k, v in again["components"].items()} == {
        k: rows[k]["calls"] + rows[k]["cached"] for k in rows
    }


def test_api_planner_cost_without_a_key_or_a_network(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"  # nothing listens: a call would fail
    proc = run_cli(
        "planner=gpt", "dataset.limit=2", "engine.dry_run=true", *QUIET, cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = tmp_path / "out" / "runs" / "demo" / "gpt-copy-espeak"
    plan = load(run_dir / "sweep_plan.json")
    gpt = plan["components"]["planner/gpt"]
    assert gpt["calls"] == 2 and gpt["loads"] == 1
    assert gpt["est_input_tokens"] > 2 * 100  # the prompt (system + user text + page image)
    assert gpt["est_output_tokens"] == 2 * 4096  # gpt's max_tokens: the upper bound
    assert gpt["est_cost_usd"] > 0 and "OpenAI" in gpt["price_source"]
    assert plan["total"]["est_cost_usd"] == gpt["est_cost_usd"]
    [problem] = plan["cannot_run_here"]  # reported, not fatal: no call needs the key yet
    assert "OPENAI_API_KEY" in problem["problem"] and problem["systems"] == ["gpt-copy-espeak"]
    assert not (tmp_path / "out" / "store").exists()
    assert not (run_dir / "stats.json").exists()

    # the planner's own price table and an output-token assumption take precedence
    priced = run_cli(
        "planner=gpt",
        "dataset.limit=2",
        "engine.dry_run=true",
        "++planner.prices={gpt-5.4: {input_per_mtok: 1.0, output_per_mtok: 0.0}}",
        "engine.plan.output_tokens=300",
        *QUIET,
        cwd=tmp_path,
        env=env,
    )
    assert priced.returncode == 0, priced.stderr[-3000:]
    row = load(run_dir / "sweep_plan.json")["components"]["planner/gpt"]
    assert row["est_output_tokens"] == 600 and row["price_source"] == "planner.prices"
    assert row["est_input_tokens"] == gpt["est_input_tokens"]
    assert row["est_cost_usd"] == pytest.approx(gpt["est_input_tokens"] / 1e6)


def test_paper_suite_plan_counts_the_shared_calls(tmp_path) -> None:
    """suite=semi: the counts test_paper_suites.py measures on the real sweep (4 backbone, 6
    image and 4 TTS calls per example), with GPU-hours from a throughput override."""
    env = {"PYTHONPATH": str(make_standin_site(tmp_path / "standins"))}
    plan = dry_sweep(
        tmp_path,
        "suite=semi",
        "dataset.limit=2",
        "++engine.plan.throughput.image.dev=36",
        "engine.plan.gpus=2",
        env=env,
    )
    rows = plan["components"]

    def calls(kind: str) -> int:
        return sum(r["calls"] for k, r in rows.items() if k.startswith(kind + "/"))

    assert plan["jobs"] == 10
    assert (calls("backbone"), calls("image"), calls("tts")) == (4 * 2, 6 * 2, 4 * 2)
    assert rows["backbone/mmada"]["loads"] == 1  # mmada_parler loads it, mmada_voxcpm reuses
    assert rows["image/dev"]["calls"] == 4  # qwen25omni's and emova's plans, 2 examples
    assert rows["image/dev"]["est_gpu_hours"] == pytest.approx(4 * 36 / 3600)
    assert plan["total"]["est_wall_hours"] == pytest.approx(plan["total"]["est_gpu_hours"] / 2)
    assert rows["tts/parler"]["est_gpu_hours"] is None  # no measured throughput: unknown
    assert "tts/parler" in plan["total"]["gpu_hours_unknown"]

    # a smaller sweep in the same directory plans only its own jobs
    one = dry_sweep(tmp_path, "system=mmada_parler", "dataset.limit=2", env=env)
    assert one["jobs"] == 1 and set(one["components"]) == {"backbone/mmada", "tts/parler"}


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"gpus": 0}, "engine.plan.gpus"),
        ({"throughput": {"image": {"dev": -1}}}, "engine.plan.throughput.image.dev"),
        ({"output_tokens": "many"}, "engine.plan.output_tokens"),
        ({"gpu_type": "A100"}, "unknown key(s) gpu_type"),
    ],
)
def test_bad_plan_settings_name_the_key(node: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PlanSettings.from_config(node)


def test_gpu_use_comes_from_the_component_or_the_throughput_settings() -> None:
    settings = PlanSettings.from_config({"gpu": "A100", "throughput": {"image": {"dev": 20}}})
    assert settings.seconds_per_call("tts/espeak") == (0.0, "uses no GPU")
    assert settings.seconds_per_call("image/mine", uses_gpu=False) == (0.0, "uses no GPU")
    assert settings.seconds_per_call("image/dev") == (20.0, "engine.plan.throughput.image.dev")
    seconds, why = settings.seconds_per_call("tts/parler")
    assert seconds is None and "A100" in why and "engine.plan.throughput.tts.parler" in why


def test_gpu_hours_count_every_gpu_a_tensor_parallel_call_holds() -> None:
    from omnistory_core.engine.dryrun import component_row

    entry = {"price_source": None, "seconds_per_call": 36.0, "seconds_source": "test", "gpus": 4}
    assert component_row(100, 0, 1, entry, [])["est_gpu_hours"] == 4.0  # 100 x 36 s x 4 GPUs
    assert component_row(100, 0, 1, {**entry, "gpus": 1}, [])["est_gpu_hours"] == 1.0
