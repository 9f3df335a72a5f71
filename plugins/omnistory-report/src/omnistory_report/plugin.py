"""omnistory-report's plugin module: the report at the end of a sweep (``sweep_finished``) and
the ``report`` and ``human`` subcommands, through the core's hooks like any plugin."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omnistory_core.hookspecs import hookimpl

log = logging.getLogger("omnistory")


def _report(argv: list[str]) -> int:
    from omnistory_report.command import main

    return main(argv)


def _human(argv: list[str]) -> int:
    from omnistory_report.human.command import main

    return main(argv)


@hookimpl
def register_commands(register):
    register("report", _report, "leaderboard, statistics, figures, HTML")
    register("human", _human, "the human-evaluation round trip (export, import)")


@hookimpl
def sweep_finished(sweep_dir: Path, config: Any) -> int:
    """Build the report from whatever the sweep has scored (``evaluation.report``, default on);
    a report that fails to build is logged, never a failed sweep: the outputs are complete."""
    evaluation = config.get("evaluation") or {}
    if not evaluation.get("report", True):
        return 0
    from omnistory_report.command import build_report

    scores = sweep_dir / "scores.jsonl"
    scored = bool(evaluation.get("metrics") or evaluation.get("judges"))
    task = _sweep_task(sweep_dir, config)
    if task is not None and task.report is not None:
        return _task_report(task, sweep_dir, scores)
    try:
        out = build_report(scores, sweep_dir / "report", run_dir=sweep_dir, print_table=scored)
    except Exception:  # noqa: BLE001 - the sweep's outputs are complete; only the report is missing
        log.exception(
            "building the report failed; the sweep outputs are complete. Rebuild it with "
            "`python -m omnistory_core report --scores %s --out %s --run-dir %s`",
            scores,
            sweep_dir / "report",
            sweep_dir,
        )
    else:
        log.info("report: %s", out / "index.html")
    return 0


def _sweep_task(sweep_dir: Path, config: Any) -> Any:
    """The sweep's task: the config's ``task.name``, else the one its job manifests name; None
    when it cannot be told (the Omni-StoryBench report is built then, as before)."""
    from omnistory_report.command import report_task

    node = config.get("task") if hasattr(config, "get") else None
    name = node.get("name") if node is not None and hasattr(node, "get") else None
    try:
        return report_task(str(name) if name else None, Path(sweep_dir))
    except Exception:  # noqa: BLE001 - the sweep's outputs are complete; the default report follows
        log.exception("the sweep's task could not be told; building the default report")
        return None


def _task_report(task: Any, sweep_dir: Path, scores: Path) -> int:
    """A task's own report (``Task.report``) at the end of its sweep; a failure is logged, never
    a failed sweep."""
    out_dir = sweep_dir / "report"
    try:
        out = task.report(out_dir, scores=scores, run_dir=sweep_dir, options={})
    except Exception:  # noqa: BLE001 - the sweep's outputs are complete; only the report is missing
        log.exception(
            "building the %s report failed; the sweep outputs are complete. Rebuild it with "
            "`python -m omnistory_core report --task %s --scores %s --run-dir %s --out %s`",
            task.name,
            task.name,
            scores,
            sweep_dir,
            out_dir,
        )
    else:
        log.info("report: %s", Path(out) / "index.html")
    return 0
