"""The instruction planner passes the plugin kit's conformance run, as every plugin's tests do."""

from __future__ import annotations

from omnistory_example_planner.plugin import InstructionPlanner
from omnistory_testkit import check_component


def test_instruction_planner_keeps_the_component_contract() -> None:
    report = check_component(InstructionPlanner, fallback_utterance="Look at that!")
    assert "outputs" in report.passed and "deterministic" in report.passed, str(report)
    # its one parameter changes the plan, so it is part of the cache key
    assert "output_params (fallback_utterance, seed)" in report.passed, str(report)
