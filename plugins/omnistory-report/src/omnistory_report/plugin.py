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
