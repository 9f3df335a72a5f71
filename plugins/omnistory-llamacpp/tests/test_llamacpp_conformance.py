"""planner=llamacpp keeps the component contract (the kit's conformance run) on the tiny GGUF with
each installed backend, and runs through the CLI as users run it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llamacpp_test_gguf import need
from omnistory_llamacpp.planner import LlamaCppPlanner
from omnistory_testkit import check_component, run_cli

CHECKS = (
    "identity",
    "reads",
    "light_import",
    "outputs",
    "cache",
    "runtime_params",
    "output_params",
    "deterministic",
    "failures",
)
BACKENDS = {"transformers": ("transformers", "torch", "gguf"), "llama_cpp": ("llama_cpp",)}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_llamacpp_keeps_the_component_contract(backend, tiny_gguf) -> None:
    need(*BACKENDS[backend], why=f"the {backend} backend is not installed (README)")
    # `auto` runs the same backend as one of the explicit names and rightly keeps its key, so the
    # backend is varied to the other explicit one
    other = {"transformers": "llama_cpp", "llama_cpp": "transformers"}[backend]
    report = check_component(
        LlamaCppPlanner,
        model=str(tiny_gguf),
        backend=backend,
        max_tokens=6,
        vary={"backend": other, "threads": 1, "narration_target_chars": 80},
    )
    print(report)
    assert {check.split()[0] for check in report.passed} >= set(CHECKS), str(report)
    assert not report.skipped, str(report)


def test_llamacpp_runs_through_the_cli_and_records_bad_plans_as_data(tiny_gguf, tmp_path: Path):
    need("transformers", "torch", "gguf", why="the transformers backend is not installed")
    proc = run_cli(
        "system=llamacpp_copy_espeak",
        f"planner.model={tiny_gguf}",
        "planner.backend=transformers",
        "planner.max_tokens=6",
        "dataset.limit=2",
        "output_root=out",
        "engine.progress=false",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    job = tmp_path / "out" / "runs" / "demo" / "llamacpp_copy_espeak"
    plans = [json.loads(line) for line in (job / "plans.jsonl").read_text().splitlines()]
    # random weights write no plan: each example's failure is a plan_* record, not a crash
    assert len(plans) == 2 and all(p["plan"] is None for p in plans), plans
    assert all(p["failure"]["category"].startswith("plan_") for p in plans), plans


def test_a_missing_model_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = run_cli("planner=llamacpp", "dataset.limit=1", "output_root=out", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "planner.model is not set" in proc.stderr
