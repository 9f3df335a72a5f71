"""``python -m omnistory_core evaluate RUN_DIR``: metrics and judges over a whole sweep.

Before scoring anything, every requested evaluator is checked (package, weights, server, key);
problems are listed together with their remedies and nothing is scored (exit status 2) unless
``--allow-partial``.  The run ends with rows per status for each evaluator; it exits 1 while any
``error`` row (an evaluator that could not answer) remains — the next run recomputes those.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from omnistory_eval.evaluators import (  # noqa: F401 - also importable from here
    build_evaluators,
    evaluator_config,
    expand_panels,
)

DEFAULT_METRICS = ("bertscore", "clip", "speech_meta")


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


class EvaluationRun:
    """What one ``evaluate`` produced: the scores table and this run's rows."""

    def __init__(self, scores_path: Path, rows: list[Any]):
        self.scores_path = scores_path
        self.rows = rows

    @property
    def statuses(self) -> dict[str, dict[str, int]]:
        from omnistory_eval.runner import status_counts

        return status_counts(self.rows)

    @property
    def errors(self) -> int:
        return sum(1 for r in self.rows if r.status == "error")


def evaluate_run(
    run_dir: Path,
    *,
    metrics: list[str],
    judges: list[str],
    overrides: list[str] | None = None,
    store_path: Path | None = None,
    retry_failures: bool = False,
    progress_enabled: bool = True,
    allow_partial: bool = False,
) -> EvaluationRun:
    """Pre-flight, then score.  Raises :class:`~.preflight.PreflightFailed` (nothing scored) when
    an evaluator cannot run, unless ``allow_partial``: then the others are scored and the ones
    that cannot run get ``error`` rows."""
    from omnistory_core.data.cache import load_examples
    from omnistory_core.engine.progress import progress_bars
    from omnistory_core.engine.store import Store
    from omnistory_core.scores import read_scores, write_scores
    from omnistory_eval.preflight import PreflightFailed, causes_by_evaluator, preflight
    from omnistory_eval.runner import (
        RunDirError,
        discover_systems,
        evaluate_systems,
        merge_rows,
        status_counts,
    )

    systems = discover_systems(run_dir)
    if not systems:
        raise RunDirError(f"{run_dir}: no complete job directory (manifest.json) found")
    fingerprints = {s.manifest["dataset"].get("fingerprint") for s in systems}
    if len(fingerprints) > 1:
        raise RunDirError(f"{run_dir}: systems were run on different datasets: {fingerprints}")
    spec = {
        k: v
        for k, v in systems[0].manifest["dataset"].items()
        if k not in ("n_examples", "fingerprint")
    }
    examples, _ = load_examples(spec)
    store = Store(store_path or Path(systems[0].manifest.get("store") or run_dir / "store"))
    evaluators = build_evaluators(metrics, judges, overrides or [], store.root)
    problems = preflight(evaluators)
    if problems and not allow_partial:
        raise PreflightFailed(problems)
    with progress_bars(progress_enabled) as progress:
        result = evaluate_systems(
            systems,
            examples,
            evaluators,
            store,
            progress=progress,
            retry_failures=retry_failures,
            blocked=causes_by_evaluator(problems),
        )
    scores_path = run_dir / "scores.jsonl"
    existing = list(read_scores(scores_path)) if scores_path.exists() else []
    write_scores(scores_path, merge_rows(existing, result.rows))
    stats = {
        "components": {k: s.to_dict() for k, s in sorted(result.stats.items())},
        "items": result.items,
        "naive_items": len(systems) * len(examples),
        "statuses": status_counts(result.rows),
    }
    (run_dir / "evaluation_stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    audit_dir = run_dir / "audit"
    audit_dir.mkdir(exist_ok=True)
    for key, records in result.audit.items():
        text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
        (audit_dir / f"{key.replace('/', '-')}.jsonl").write_text(text, encoding="utf-8")
    return EvaluationRun(scores_path, result.rows)


def run_evaluation(
    run_dir: Path,
    *,
    metrics: list[str],
    judges: list[str],
    overrides: list[str] | None = None,
    store_path: Path | None = None,
    retry_failures: bool = False,
    progress_enabled: bool = True,
    allow_partial: bool = False,
) -> Path:
    """:func:`evaluate_run` returning the scores table's path."""
    return evaluate_run(
        run_dir,
        metrics=metrics,
        judges=judges,
        overrides=overrides,
        store_path=store_path,
        retry_failures=retry_failures,
        progress_enabled=progress_enabled,
        allow_partial=allow_partial,
    ).scores_path


def summary_table(run: EvaluationRun):
    """A ``rich.table.Table``: rows per status for each evaluator, and the first error's cause."""
    from rich.table import Table

    table = Table(title="Evaluation summary (scores rows by status)", header_style="bold")
    table.add_column("evaluator")
    for status in ("ok", "invalid", "error", "missing_output"):
        table.add_column(status, justify="right")
    table.add_column("cause of the errors", overflow="fold")
    causes: dict[str, str] = {}
    for row in run.rows:
        if row.status == "error":
            cause = row.cause or ""
            causes.setdefault(
                f"{row.kind}/{row.evaluator}", cause if len(cause) <= 240 else cause[:239] + "…"
            )
    for key, counts in run.statuses.items():
        error = str(counts["error"]) if not counts["error"] else f"[bold red]{counts['error']}[/]"
        table.add_row(
            key,
            str(counts["ok"]),
            str(counts["invalid"]),
            error,
            str(counts["missing_output"]),
            causes.get(key, ""),
        )
    return table


def _console(stderr: bool = False):
    from rich.console import Console

    console = Console(stderr=stderr)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console = Console(stderr=stderr, width=160)  # logs: not the 80-column default
    return console


def evaluate_and_summarize(run_dir: Path, **kwargs: Any) -> tuple[int, Path | None]:
    """Evaluate, print the pre-flight problems or the summary, and return (exit status, scores
    path): 2 when the pre-flight stopped it (nothing scored), 1 when ``error`` rows remain."""
    from omnistory_eval.preflight import PreflightFailed, problems_table

    try:
        run = evaluate_run(run_dir, **kwargs)
    except PreflightFailed as exc:
        _console(stderr=True).print(problems_table(exc.problems))
        print(
            f"omnistory evaluate: {exc}; nothing was scored. Fix them, or pass --allow-partial "
            "to score with the evaluators that can run.",
            file=sys.stderr,
        )
        return 2, None
    _console().print(summary_table(run))
    if run.errors:
        print(
            f"omnistory evaluate: {run.errors} 'error' row(s): an evaluator could not answer. "
            "They count in no score; rerun the same command once the cause is fixed.",
            file=sys.stderr,
        )
        return 1, run.scores_path
    return 0, run.scores_path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="omnistory evaluate", description=__doc__)
    parser.add_argument("run_dir", type=Path, help="a sweep directory or one job directory")
    parser.add_argument(
        "--metrics",
        default=",".join(DEFAULT_METRICS),
        help="comma-separated metric names ('' for none)",
    )
    parser.add_argument(
        "--judges",
        default="",
        help="comma-separated judge ids or panels (panel_a, panel_b, panel_c, all)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        help="override an evaluator parameter, e.g. metric.bertscore.batch_size=8",
    )
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        help="store directory (default: the one recorded in the job manifests)",
    )
    parser.add_argument(
        "--retry-failures",
        action="store_true",
        help="also recompute stored results that are failures about the item (an evaluator "
        "error is always recomputed)",
    )
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="score with the evaluators that can run; the others get 'error' rows (the exit "
        "status is still non-zero)",
    )
    parser.add_argument("--no-report", action="store_true", help="do not rebuild the report")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    status, scores = evaluate_and_summarize(
        args.run_dir,
        metrics=_split(args.metrics),
        judges=_split(args.judges),
        overrides=args.overrides,
        store_path=args.store,
        retry_failures=args.retry_failures,
        progress_enabled=not args.no_progress,
        allow_partial=args.allow_partial,
    )
    if scores is None:
        return status
    print(f"scores: {scores}")
    if not args.no_report:
        # the report distribution builds it (its sweep_finished hook), as at the end of a sweep
        from omnistory_core.plugins import load_plugins
        from omnistory_core.seams import REPORT_DISTRIBUTION

        registry = load_plugins()
        if registry.has_sweep_finished():
            evaluation = {"metrics": _split(args.metrics), "judges": _split(args.judges)}
            status = max(status, registry.sweep_finished(args.run_dir, {"evaluation": evaluation}))
            print(f"report: {args.run_dir / 'report'}")
        else:
            print(f"no report: install {REPORT_DISTRIBUTION} for one (or pass --no-report)")
    return status
