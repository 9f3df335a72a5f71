"""A vLLM server has no provider batch API: planner.batch=true is refused when the planner is
built, with one line, before any call (the batch parameters are not declared at all)."""

from __future__ import annotations

import pytest
from omnistory_testkit import run_cli
from omnistory_vllm.planner import GLMPlanner, InternVLPlanner, Qwen35Planner

from omnistory_core.kit.planning.base import PlannerConfigError


@pytest.mark.parametrize("cls", [GLMPlanner, InternVLPlanner, Qwen35Planner], ids=lambda c: c.name)
def test_batch_true_is_refused_at_build_time(cls):
    with pytest.raises(PlannerConfigError, match=r"planner\.batch=true is not supported") as info:
        cls(batch=True)
    assert "\n" not in str(info.value) and f"planner={cls.name}" in str(info.value)
    assert "batch" not in cls().params  # batch=false is the planner as it is
    assert cls(batch=False).params == cls().params
    assert not any(p.name.startswith("batch") for p in cls.parameters or ())


def test_cli_refuses_batch_for_a_vllm_planner_in_one_line(tmp_path):
    proc = run_cli(
        "planner=glm",
        "++planner.batch=true",
        "dataset.limit=1",
        "output_root=out",
        "engine.progress=false",
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "planner.batch" in line]
    assert len(lines) == 1 and "no provider batch API" in lines[0]
