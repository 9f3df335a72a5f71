"""omnistory-report's plugin module: the report at the end of a sweep (``sweep_finished``) and
the ``report``, ``export`` and ``human`` subcommands, through the core's hooks like any plugin."""

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


def _export(argv: list[str]) -> int:
    from omnistory_report.export_command import main

    return main(argv)


@hookimpl
def register_commands(register):
    register("report", _report, "leaderboard, statistics, figures, HTML")
    register("export", _export, "scored runs in a benchmark's official result formats")
    register("human", _human, "the human-evaluation round trip (export, import)")


#: the exit status of a sweep or ``evaluate`` whose outputs and scores are complete but whose
#: report could not be built
REPORT_FAILED = 1


@hookimpl
def sweep_finished(sweep_dir: Path, config: Any) -> int:
    """Build the report of the task the runs belong to from whatever the sweep has scored
    (``evaluation.report``, default on).  A report that cannot be built is one line naming the
    cause and how to rebuild it, and exit status 1 (the outputs and scores are complete)."""
    evaluation = config.get("evaluation") or {}
    if not evaluation.get("report", True):
        return 0
    from omnistory_report.command import build_report

    scores = sweep_dir / "scores.jsonl"
    scored = bool(evaluation.get("metrics") or evaluation.get("judges"))
    try:
        task = sweep_task(sweep_dir, config)
    except Exception as exc:  # noqa: BLE001 - reported in one line, the sweep's exit status says it
        return _failed("the report's task cannot be told", exc, "--task NAME", sweep_dir, scores)
    if task.report is not None:
        return _task_report(task, sweep_dir, scores)
    try:
        out = build_report(scores, sweep_dir / "report", run_dir=sweep_dir, print_table=scored)
    except Exception as exc:  # noqa: BLE001 - the sweep's outputs are complete; only the report is missing
        return _failed("building the report failed", exc, "", sweep_dir, scores)
    log.info("report: %s", out / "index.html")
    return 0


def sweep_task(sweep_dir: Path, config: Any) -> Any:
    """The task the runs of ``sweep_dir`` belong to: the one their job manifests name (or the
    evaluation recorded), else the config's ``task.name``, else the default task.  A sweep's own
    config names the default task when its jobs chose theirs (``-m system=copy_paste,...``), so
    the runs decide first."""
    from omnistory_report.command import job_tasks, report_task

    if job_tasks(Path(sweep_dir)):
        return report_task(None, Path(sweep_dir))
    node = config.get("task") if hasattr(config, "get") else None
    name = node.get("name") if node is not None and hasattr(node, "get") else None
    return report_task(str(name) if name else None, Path(sweep_dir))


def _failed(what: str, exc: BaseException, task_flag: str, run_dir: Path, scores: Path) -> int:
    cause = " ".join(f"{type(exc).__name__}: {exc}".split())
    flag = f" {task_flag}" if task_flag else ""
    log.error(
        "%s: %s. The outputs and scores are complete; rebuild it with `python -m omnistory_core"
        " report%s --scores %s --run-dir %s --out %s`",
        what,
        cause,
        flag,
        scores,
        run_dir,
        run_dir / "report",
    )
    return REPORT_FAILED


def _task_report(task: Any, sweep_dir: Path, scores: Path) -> int:
    """A task's own report (``Task.report``) at the end of its sweep or evaluation; a failure is
    one line and exit status 1."""
    out_dir = sweep_dir / "report"
    try:
        out = task.report(out_dir, scores=scores, run_dir=sweep_dir, options={})
    except Exception as exc:  # noqa: BLE001 - the sweep's outputs are complete; only the report is missing
        what = f"building the {task.name} report failed"
        return _failed(what, exc, f"--task {task.name}", sweep_dir, scores)
    log.info("report: %s", Path(out) / "index.html")
    return 0
