"""``python -m omnistory_core evaluate RUN_DIR``: metrics and judges over a whole sweep.

The run directory's task (its manifests' ``task.name``; ``--task`` names it) decides what is
scored: Omni-StoryBench's pools (one item per transition), or the units a task with its own
``evaluation`` gives (ViStoryBench: shots, stories and the run).  Such a task also scores an
external outputs tree (``--outputs DIR`` with the ``dataset.*`` options it answers), its scores
written to RUN_DIR (default: ``<DIR>-evaluation`` beside it).  ``--dry-run`` plans the
evaluation (calls, cached results, estimated cost) and scores nothing.

Before scoring anything, every requested evaluator is checked (package, weights, server, key);
problems are listed together with their remedies and nothing is scored (exit status 2) unless
``--allow-partial``.  The run ends with rows per status for each evaluator; it exits 1 while any
``error`` row (an evaluator that could not answer) remains — the next run recomputes those.

Evaluation uses the devices generation used: ``engine.devices`` (and ``engine.device_locks``) as
the job manifests of RUN_DIR recorded them, or as given on the command line
(``engine.devices=[0,1,2,3]``, ``engine.devices=none``).  With two devices or more, every metric
and judge that needs a GPU scores on replicas spread over the free devices, still one stage per
evaluator over the whole sweep (:func:`omnistory_eval.runner.score_units`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omnistory_core.jobdir import JobDirError
from omnistory_core.tasks import Task
from omnistory_eval.evaluators import (  # noqa: F401 - also importable from here
    build_evaluators,
    evaluator_config,
    expand_panels,
)
from omnistory_eval.task_runs import (  # noqa: F401 - also importable from here
    EvaluationInputError,
    check_scopes,
    run_task,
    task_evaluation_of,
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


def default_run_dir(outputs: Path) -> Path:
    """Where the scores of an external outputs tree go by default: ``<DIR>-evaluation``."""
    outputs = outputs.resolve()
    return outputs.with_name(f"{outputs.name}-evaluation")


#: the ``engine.*`` options ``evaluate`` takes as positional ``KEY=VALUE`` arguments
ENGINE_OPTIONS = ("engine.devices", "engine.device_locks")


def split_engine_options(values: list[str]) -> tuple[list[str], dict[str, Any]]:
    """The positional arguments without the ``engine.devices=...`` / ``engine.device_locks=...``
    options, and those options (key without ``engine.``; values read as YAML: ``[0,1]``)."""
    import yaml

    rest: list[str] = []
    engine: dict[str, Any] = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or key not in ENGINE_OPTIONS:
            rest.append(value)
            continue
        try:
            engine[key.split(".", 1)[1]] = yaml.safe_load(text) if text else None
        except yaml.YAMLError as exc:
            raise EvaluationInputError(f"{value}: not a YAML value: {exc}") from None
    return rest, engine


def recorded_engine(run_dir: Path) -> dict[str, Any]:
    """``engine.devices`` and ``engine.device_locks`` as the first complete job manifest of
    ``run_dir`` recorded them (its resolved config); {} when there is none (an outputs tree)."""
    from omnistory_eval.runner import discover_manifests

    for job in discover_manifests(run_dir):
        config = job.manifest.get("config")
        engine = config.get("engine") if isinstance(config, dict) else None
        if isinstance(engine, dict):
            return {k: engine[k] for k in ("devices", "device_locks") if k in engine}
    return {}


def evaluation_devices(
    run_dir: Path,
    evaluators: list[Any],
    store_root: Path,
    engine: dict[str, Any] | None = None,
) -> Any:
    """The device runner the evaluation's stages get (``StageDevices`` or None): from
    ``engine`` (``devices``, ``device_locks``: the command line's or the sweep's settings), else
    from what the job manifests of ``run_dir`` recorded, else ``auto`` (the config's default).
    An evaluator needing more GPUs at once than there are is refused in one line."""
    from omnistory_core.engine.devices import DeviceError
    from omnistory_core.engine.replicas import stage_devices

    settings = {**recorded_engine(run_dir), **(engine or {})}
    try:
        return stage_devices(
            settings.get("devices", "auto"),
            settings.get("device_locks") or None,
            store_root,
            evaluators,
        )
    except DeviceError as exc:
        raise EvaluationInputError(f"evaluate: {exc}") from None


def _write_results(
    run_dir: Path, result: Any, naive_items: int, units: dict[str, int] | None = None
) -> Path:
    """``scores.jsonl`` (merged with the rows of other evaluators), ``evaluation_stats.json``
    and ``audit/``."""
    from omnistory_core.scores import read_scores, write_scores
    from omnistory_eval.runner import merge_rows, status_counts

    run_dir.mkdir(parents=True, exist_ok=True)
    scores_path = run_dir / "scores.jsonl"
    existing = list(read_scores(scores_path)) if scores_path.exists() else []
    write_scores(scores_path, merge_rows(existing, result.rows))
    stats: dict[str, Any] = {
        "components": {k: s.to_dict() for k, s in sorted(result.stats.items())},
        "items": result.items,
        "naive_items": naive_items,
        "statuses": status_counts(result.rows),
    }
    if units is not None:
        stats["units"] = units
    (run_dir / "evaluation_stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    audit_dir = run_dir / "audit"
    audit_dir.mkdir(exist_ok=True)
    for key, records in result.audit.items():
        text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
        (audit_dir / f"{key.replace('/', '-')}.jsonl").write_text(text, encoding="utf-8")
    return scores_path


def evaluate_task_run(
    task: Task,
    run_dir: Path,
    *,
    metrics: list[str],
    judges: list[str],
    overrides: list[str] | None = None,
    store_path: Path | None = None,
    retry_failures: bool = False,
    progress_enabled: bool = True,
    allow_partial: bool = False,
    outputs: Path | None = None,
    dataset: dict[str, Any] | None = None,
    engine: dict[str, Any] | None = None,
    prior: dict[str, Any] | None = None,
) -> EvaluationRun:
    """:func:`evaluate_run` for a task with its own ``evaluation``: its units per scope, each
    evaluator over those of its scope."""
    from omnistory_core.engine.progress import progress_bars
    from omnistory_core.engine.store import Store
    from omnistory_eval.preflight import PreflightFailed, causes_by_evaluator, preflight
    from omnistory_eval.runner import evaluate_task, task_units

    evaluation = task_evaluation_of(task, run_dir, outputs=outputs, dataset=dataset)
    units = task_units(evaluation)
    recorded = getattr(evaluation, "store", None)
    store = Store(store_path or Path(recorded or run_dir / "store"))
    evaluators = build_evaluators(metrics, judges, overrides or [], store.root)
    check_scopes(task, evaluators, units)
    problems = preflight(evaluators)
    if problems and not allow_partial:
        raise PreflightFailed(problems)
    devices = evaluation_devices(run_dir, evaluators, store.root, engine)
    with progress_bars(progress_enabled) as progress:
        result = evaluate_task(
            evaluation,
            evaluators,
            store,
            progress=progress,
            retry_failures=retry_failures,
            blocked=causes_by_evaluator(problems),
            devices=devices,
            prior=prior,
        )
    counts = {scope: len(found) for scope, found in units.items()}
    scores_path = _write_results(run_dir, result, counts.get("item", 0), counts)
    from omnistory_eval.run_info import write_run_info

    write_run_info(run_dir, task.name, getattr(evaluation, "systems", None) or [], evaluators)
    return EvaluationRun(scores_path, result.rows)


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
    task: str | None = None,
    outputs: Path | None = None,
    dataset: dict[str, Any] | None = None,
    engine: dict[str, Any] | None = None,
    prior: dict[str, Any] | None = None,
) -> EvaluationRun:
    """Pre-flight, then score.  Raises :class:`~.preflight.PreflightFailed` (nothing scored) when
    an evaluator cannot run, unless ``allow_partial``: then the others are scored and the ones
    that cannot run get ``error`` rows.  ``task``, ``outputs`` and ``dataset``: see
    :func:`run_task` and :func:`task_evaluation_of` (a task with its own ``evaluation``).
    ``engine``: ``devices`` / ``device_locks`` to score on (see :func:`evaluation_devices`).
    ``prior``: what the sweep's stream computed before (:mod:`omnistory_eval.sooner`), counted
    as computed here."""
    selected = run_task(run_dir, task, outputs)
    if selected.evaluation is not None:
        return evaluate_task_run(
            selected,
            run_dir,
            metrics=metrics,
            judges=judges,
            overrides=overrides,
            store_path=store_path,
            retry_failures=retry_failures,
            progress_enabled=progress_enabled,
            allow_partial=allow_partial,
            outputs=outputs,
            dataset=dataset,
            engine=engine,
            prior=prior,
        )
    if outputs is not None:
        raise EvaluationInputError(
            f"--outputs: task {selected.name} reads its job directories only (pass RUN_DIR)"
        )
    from omnistory_core.data.cache import load_examples
    from omnistory_core.engine.progress import progress_bars
    from omnistory_core.engine.store import Store
    from omnistory_eval.preflight import PreflightFailed, causes_by_evaluator, preflight
    from omnistory_eval.runner import RunDirError, discover_systems, evaluate_systems

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
    if examples:  # an evaluator of another task (a story- or run-level metric) is refused
        from omnistory_core.engine.hashing import MediaHasher
        from omnistory_eval.runner import PoolUnit, candidate_pool

        pool, missing = candidate_pool(systems[0], examples[0], MediaHasher())
        check_scopes(selected, evaluators, {"item": [PoolUnit("", "", pool, missing)]})
    problems = preflight(evaluators)
    if problems and not allow_partial:
        raise PreflightFailed(problems)
    devices = evaluation_devices(run_dir, evaluators, store.root, engine)
    with progress_bars(progress_enabled) as progress:
        result = evaluate_systems(
            systems,
            examples,
            evaluators,
            store,
            progress=progress,
            retry_failures=retry_failures,
            blocked=causes_by_evaluator(problems),
            devices=devices,
            prior=prior,
        )
    scores_path = _write_results(run_dir, result, len(systems) * len(examples))
    from omnistory_eval.run_info import write_run_info

    write_run_info(run_dir, selected.name, [], evaluators)
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
        console = _console(stderr=True)
        if console.width >= 120:
            console.print(problems_table(exc.problems))
        else:  # a narrow table cuts the settings to copy: one plain line per problem instead
            for p in exc.problems:
                print(
                    f"omnistory evaluate: {p.evaluator}: {p.check} {p.target}: {p.detail}"
                    f" -> {p.remedy}",
                    file=sys.stderr,
                )
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


def split_positionals(values: list[str]) -> tuple[Path | None, dict[str, Any]]:
    """RUN_DIR and the ``dataset=NAME`` / ``dataset.KEY=VALUE`` options among the positional
    arguments (values read as YAML: ``dataset.stories=[1,8]``)."""
    import yaml

    run_dir: Path | None = None
    dataset: dict[str, Any] = {}
    for value in values:
        if "=" not in value:
            if run_dir is not None:
                raise EvaluationInputError(f"two run directories given: {run_dir} and {value}")
            run_dir = Path(value)
            continue
        key, _, text = value.partition("=")
        if key == "dataset":
            dataset["name"] = text
        elif key.startswith("dataset.") and key.count(".") == 1:
            try:
                dataset[key.split(".", 1)[1]] = yaml.safe_load(text) if text else None
            except yaml.YAMLError as exc:
                raise EvaluationInputError(f"{value}: not a YAML value: {exc}") from None
        else:
            raise EvaluationInputError(
                f"{value}: evaluate takes dataset=NAME, dataset.KEY=VALUE, engine.devices=... and"
                " engine.device_locks=... options only (an evaluator parameter is --set"
                " metric.NAME.KEY=VALUE)"
            )
    return run_dir, dataset


def default_metrics(run_dir: Path, task_name: str | None, outputs: Path | None) -> list[str]:
    """The metrics ``evaluate`` runs when ``--metrics`` is not given: a task with its own
    evaluation runs its declared evaluators that are metrics; Omni-StoryBench its three."""
    from omnistory_core.plugins import load_plugins

    task = run_task(run_dir, task_name, outputs)
    if task.evaluation is None:
        return list(DEFAULT_METRICS)
    registry = load_plugins()
    return [n for n in task.evaluators if n in registry.names("metric")]


@contextmanager
def _one_line_job_dir_errors() -> Iterator[None]:
    """A malformed job directory file (:class:`JobDirError`, naming the file and line) as one
    line and exit 2."""
    try:
        yield
    except JobDirError as exc:
        raise EvaluationInputError(" ".join(str(exc).split())) from None


def _run_arguments(
    args: argparse.Namespace, parser: argparse.ArgumentParser
) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """RUN_DIR, the keyword arguments the dry run (``print_run_plan``) and the evaluation
    (``evaluate_and_summarize``) share, and the ``engine.*`` options: one reading of the run,
    outputs, dataset and evaluator arguments for both."""
    positionals, engine = split_engine_options(args.positionals)
    run_dir, dataset = split_positionals(positionals)
    if run_dir is None:
        if args.outputs is None:
            parser.error("a run directory is required (or --outputs DIR)")
        run_dir = default_run_dir(args.outputs)
    metrics = (
        _split(args.metrics)
        if args.metrics is not None
        else default_metrics(run_dir, args.task, args.outputs)
    )
    common = {
        "metrics": metrics,
        "judges": _split(args.judges),
        "overrides": args.overrides,
        "store_path": args.store,
        "allow_partial": args.allow_partial,
        "task": args.task,
        "outputs": args.outputs,
        "dataset": dataset,
    }
    return run_dir, common, engine


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="omnistory evaluate", description=__doc__)
    parser.add_argument(
        "positionals",
        nargs="*",
        metavar="RUN_DIR | dataset.KEY=VALUE | engine.devices=...",
        help="a sweep directory or one job directory (with --outputs: where the scores go,"
        " default <DIR>-evaluation); dataset=NAME and dataset.KEY=VALUE: the dataset the runs"
        " answer (overrides a manifest's; required for --outputs); engine.devices=[0,1,...] /"
        " none and engine.device_locks=DIR: the devices to score on (default: the ones the job"
        " manifests recorded)",
    )
    parser.add_argument(
        "--metrics",
        default=None,
        help="comma-separated metric names ('' for none; default: "
        + ",".join(DEFAULT_METRICS)
        + ", or the task's own metrics)",
    )
    parser.add_argument(
        "--judges",
        default="",
        help="comma-separated judge ids or panels (panel_a, panel_b, panel_c, all)",
    )
    parser.add_argument(
        "--task",
        default=None,
        help="the task of the outputs (default: the one the job manifests name)",
    )
    parser.add_argument(
        "--outputs",
        type=Path,
        default=None,
        help="an external outputs tree in the task's official layout (every run found is a"
        " system), scored instead of job directories",
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
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="plan the evaluation (calls, cached results, cost) and score nothing",
    )
    parser.add_argument("--no-report", action="store_true", help="do not rebuild the report")
    parser.add_argument("--no-progress", action="store_true")
    # positionals may come after options (``--outputs DIR dataset.root=...``)
    args = parser.parse_intermixed_args(argv)
    with _one_line_job_dir_errors():
        run_dir, common, engine = _run_arguments(args, parser)
    if args.dry_run:
        from omnistory_eval.plan import print_run_plan

        return print_run_plan(run_dir, **common)
    with _one_line_job_dir_errors():  # a malformed job directory file names the file and line
        status, scores = evaluate_and_summarize(
            run_dir,
            **common,
            retry_failures=args.retry_failures,
            progress_enabled=not args.no_progress,
            engine=engine,
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
            evaluation = {"metrics": common["metrics"], "judges": common["judges"]}
            # the task of the runs just scored (an outputs tree has no manifest to say it)
            task = {"name": run_task(run_dir, args.task, args.outputs).name}
            built = registry.sweep_finished(run_dir, {"evaluation": evaluation, "task": task})
            status = max(status, built)
            if not built:
                print(f"report: {run_dir / 'report'}")
        else:
            print(f"no report: install {REPORT_DISTRIBUTION} for one (or pass --no-report)")
    return status
