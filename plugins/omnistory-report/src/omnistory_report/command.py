"""``python -m omnistory_core report``: leaderboard, statistics, figures and the HTML report.

    report --scores PATH --out DIR [--run-dir DIR] [--bootstrap N] [--seed S] [--no-html]
    report --task NAME [--scores PATH] [--run-dir DIR] [--bench-results-csv CSV ...] --out DIR
    report --cross OSB_RUN_DIR VSB_RUN_DIR --out DIR    (:mod:`omnistory_report.cross`)

A task that declares its own report (``Task.report``, e.g. ViStoryBench) builds it: the task is
``--task``, else the one the run directory's job manifests name; every other task (and a run
whose manifests name none) gets the Omni-StoryBench report below, unchanged.

Writes every table and figure of :data:`omnistory_report.registry.PAPER_TABLES`, its own and the
paper's numbered ones under their paper names (``tables/table08_dreamsim_correlations.csv``,
``figures/figure12_...``), with an index (``tables/index.md``, ``paper_tables.json``): see
:mod:`omnistory_report.paper`.

Works on whatever has been scored so far: missing systems, missing examples and partial rows only
make the affected numbers undefined (shown as —), never the report fail.  The end-of-sweep hook
calls :func:`build_report` directly.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from omnistory_report.analysis.bootstrap import DEFAULT_DRAWS, DEFAULT_SEED
from omnistory_report.analysis.statistics import StatisticsOptions
from omnistory_report.context import Context

if TYPE_CHECKING:
    from omnistory_report.html import ReportContext
    from omnistory_report.registry import Written

_OPTIONS = {
    "bootstrap": DEFAULT_DRAWS,
    "seed": DEFAULT_SEED,
    "weight_draws": 10_000,
    "html": True,
    "print_table": True,
    "console": None,
    "panels": None,
    "tables": None,
}
#: the statistics shown on the report page itself, not only linked
INLINE_STATISTICS = (
    "bootstrap_totals",
    "bottleneck_valid",
    "bottleneck_zero",
    "paradigm_means",
    "partial_correlations_valid",
)


def build_report(
    scores_path: str | Path,
    out_dir: str | Path,
    run_dir: str | Path | None = None,
    examples: Sequence | None = None,
    **options: Any,
) -> Path:
    """Build the full report into ``out_dir`` and return ``out_dir``.

    A scores file that does not exist yet is allowed when ``run_dir`` is given (a sweep without
    evaluation): the report then shows the outputs only.

    Options: ``bootstrap`` (draws, default 20,000), ``seed`` (20260925), ``weight_draws``
    (10,000), ``html`` (True), ``print_table`` (True), ``console`` (a rich Console), ``panels``
    (explicit judge panels for the agreement tables), ``tables`` (slugs of
    :data:`~omnistory_report.registry.PAPER_TABLES` to write; default all: the inputs only
    those need are read).  ``examples`` are the dataset's StoryExamples; when omitted and
    ``run_dir`` is given they are loaded from a manifest's ``dataset`` spec.
    """
    from omnistory_report.paper import paper_index, write_index
    from omnistory_report.registry import make_and_write, select

    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise TypeError(f"build_report got unknown options: {sorted(unknown)}")
    opt = {**_OPTIONS, **options}
    tables = select(opt["tables"])
    ctx = Context(
        Path(scores_path),
        Path(out_dir),
        Path(run_dir) if run_dir is not None else None,
        examples,
        StatisticsOptions(
            draws=int(opt["bootstrap"]),
            seed=int(opt["seed"]),
            weight_draws=int(opt["weight_draws"]),
            panels=opt["panels"],
        ),
    )
    from omnistory_report.analysis.stand_in import stand_in_leaderboard

    with_leaderboard = any(t.write == "leaderboard" for t in tables)
    # stand-in metrics (real weights, not the paper's) have a leaderboard of their own, built
    # with the paper's (the scores are read only when one of them is wanted)
    stand_in, stand_in_cols = (
        stand_in_leaderboard(ctx.frame) if with_leaderboard or opt["html"] else (pd.DataFrame(), [])
    )
    if opt["print_table"] and with_leaderboard:
        from omnistory_report.analysis.leaderboard import has_paper_scores
        from omnistory_report.terminal import (
            print_leaderboard,
            print_no_paper_scores,
            print_stand_in,
        )

        if has_paper_scores(ctx.lb) or stand_in.empty:
            print_leaderboard(ctx.lb, ctx.info, opt["console"])
            print_stand_in(stand_in, stand_in_cols, ctx.info, opt["console"])
        else:
            # a run scored by stand-ins alone (the offline demo): their leaderboard first, the
            # paper's (only dashes) as one line
            print_stand_in(stand_in, stand_in_cols, ctx.info, opt["console"])
            print_no_paper_scores(_paper_scores_line(ctx.scores_path, ctx.run_dir), opt["console"])
    written = [make_and_write(ctx, t) for t in tables]
    stand_in_png = None
    if not stand_in.empty:
        from omnistory_report.figures import stand_in_figure

        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        stand_in.to_csv(ctx.out_dir / "stand_in_leaderboard.csv", index=False)
        stand_in_png = stand_in_figure(stand_in, stand_in_cols, ctx.info, ctx.out_dir)
    write_index(ctx.out_dir, paper_index(written))
    if opt["html"]:
        from omnistory_report.html import write_html_report

        write_html_report(_page(ctx, written, stand_in, stand_in_cols, stand_in_png))
    return ctx.out_dir


def _page(
    ctx: Context,
    written: Sequence[Written],
    stand_in: pd.DataFrame | None = None,
    stand_in_cols: Sequence[Any] = (),
    stand_in_png: Path | None = None,
) -> ReportContext:
    """The HTML page's inputs: what was written, shown only where it has data (the files are
    all written: the paper index names them)."""
    from omnistory_report.analysis.leaderboard import has_paper_scores
    from omnistory_report.figures import empty_reason
    from omnistory_report.html import ReportContext

    paper_scored = has_paper_scores(ctx.lb)
    standing_in = stand_in is not None and not stand_in.empty

    figures = [
        (w.title, ctx.out_dir / w.file)
        for w in written
        if w.table.write == "figure" and w.table.shown and w.file is not None
    ]
    tables = [
        (w.title, w.table.slug)
        for w in written
        if w.table.write == "table" and w.file is not None and _has_data(ctx.out_dir / w.file)
    ]
    return ReportContext(
        out_dir=ctx.out_dir,
        lb=ctx.lb,
        info=ctx.info,
        cube=ctx.cube,
        frame=ctx.frame,
        figures=[(t, p) for t, p in figures if empty_reason(p) is None],
        tables=tables,
        inline_tables=_inline_tables(ctx),
        runs=ctx.runs,
        examples=ctx.examples,
        notes=ctx.notes,
        run_tables=_run_tables(ctx.runs, ctx.produced, ctx.lengths, ctx.reference_lengths),
        scores_note=(
            _scores_note(ctx.scores_path, ctx.run_dir)
            if ctx.lb.empty and not standing_in
            else _paper_scores_line(ctx.scores_path, ctx.run_dir)
            if not paper_scored and standing_in
            else ""
        ),
        stand_in=stand_in if stand_in is not None else pd.DataFrame(),
        stand_in_columns=tuple(stand_in_cols),
        stand_in_figure=stand_in_png,
        paper_scored=paper_scored,
    )


def _inline_tables(ctx: Context) -> list[tuple[str, pd.DataFrame]]:
    """The tables on the page itself: evaluator errors, judges left out, key statistics."""
    inline = []
    if ctx.n_error:
        from omnistory_report.analysis.leaderboard import cell_means

        erred = cell_means(ctx.cube)
        erred = erred[erred["n_error"] > 0][
            ["system", "kind", "track", "evaluator", "n_examples", "n_error"]
        ]
        inline.append(("Evaluator errors (examples left out of these cells)", erred))
    coverage = ctx.stat("judge_coverage")
    excluded = coverage.frame[coverage.frame["excluded_valid_only"]] if coverage else None
    if excluded is not None and not excluded.empty:
        inline.append(("Judges left out of valid-only means (no valid example)", excluded))
    for stem in INLINE_STATISTICS:
        table = ctx.stat(stem)
        if table is not None and _frame_has_data(table.frame):
            inline.append((table.title, table.frame))
    return inline


def _frame_has_data(frame: pd.DataFrame) -> bool:
    """A table worth showing: some rows and, if it has float columns, a number in one of them
    (a correlation table of ``n = 0`` rows with only dashes is not)."""
    if frame.empty:
        return False
    floats = frame.select_dtypes(include="float")
    return floats.shape[1] == 0 or bool(floats.notna().to_numpy().any())


def _has_data(csv: Path) -> bool:
    try:
        return _frame_has_data(pd.read_csv(csv))
    except (OSError, ValueError):  # pandas' EmptyDataError is a ValueError
        return False


def _run_tables(
    runs: dict[str, Any],
    produced: pd.DataFrame,
    lengths: pd.DataFrame | None,
    reference_lengths: list[int] | None,
) -> list[tuple[str, pd.DataFrame]]:
    """The tables of the report's first section: outputs, narration lengths, calls and cache."""
    from omnistory_report.rundir import calls_frame

    out = [("Outputs written and failures, per system and modality", produced)]
    if lengths is not None and not lengths.empty:
        groups = [(s, g["length"]) for s, g in lengths.groupby("system", sort=True)]
        if reference_lengths:
            groups.append(("reference", pd.Series(reference_lengths, dtype=float)))
        table = pd.DataFrame(
            [
                {
                    "system": s,
                    "n": len(v),
                    "mean": float(v.mean()),
                    "median": float(v.median()),
                    "min": int(v.min()),
                    "max": int(v.max()),
                }
                for s, v in groups
            ]
        )
        out.append(("Narration length (characters after trimming)", table))
    out.append(("Component calls and store cache hits (stats.json)", calls_frame(runs)))
    return out


def _scores_note(scores_path: Path, run_dir: str | Path | None) -> str:
    """The one line shown instead of empty score sections, with the commands that fill them."""
    run = Path(run_dir) if run_dir is not None else scores_path.parent
    evaluators = "--metrics bertscore,clip,speech_meta --judges all"
    return (
        f"No scores yet ({scores_path} does not exist or has no rows): the leaderboard, score "
        f"figures and statistics appear once the run is scored. Score it with "
        f"`python -m omnistory_core evaluate {run} {evaluators}`, then rebuild this report with "
        f"`python -m omnistory_core report --scores {scores_path} --out {run / 'report'} "
        f"--run-dir {run}`. The model downloads this needs, with their sizes: "
        f"`python -m omnistory_core prefetch {evaluators} --dry-run`."
    )


def _paper_scores_line(scores_path: Path, run_dir: str | Path | None) -> str:
    """The one line that stands for the paper's leaderboard when only stand-ins scored."""
    run = Path(run_dir) if run_dir is not None else scores_path.parent
    evaluators = "--metrics bertscore,clip,speech_meta --judges all"
    return (
        "The paper's leaderboard (BERTScore roberta-large, CLIP ViT-B/32, speech metadata with "
        "Whisper large-v3, the LLM judges) has no scores yet: its checkpoints and judges are not "
        f"installed here. Score with them by `python -m omnistory_core evaluate {run} "
        f"{evaluators}`; the downloads this needs: `python -m omnistory_core prefetch "
        f"{evaluators} --dry-run`."
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m omnistory_core report",
        description="Leaderboard (valid-only and zero-filled), statistics, figures and the HTML "
        "report from a scores table.",
    )
    p.add_argument("--scores", type=Path, help="scores.jsonl (required for omnistorybench)")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--run-dir", type=Path, help="run directory (system folders) for the HTML pages")
    p.add_argument("--bootstrap", type=int, default=DEFAULT_DRAWS, help="bootstrap draws")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed")
    p.add_argument("--no-html", action="store_true", help="skip the HTML report")
    p.add_argument(
        "--task",
        help="the task whose report to build (default: the one the run directory's job "
        "manifests name, else omnistorybench)",
    )
    p.add_argument(
        "--bench-results-csv",
        action="append",
        type=Path,
        default=[],
        metavar="CSV",
        help="an official bench_results CSV ranked beside the scores (repeatable: lite and "
        "full; tasks with their own report, e.g. vistorybench)",
    )
    p.add_argument(
        "--cross",
        nargs="+",
        type=Path,
        metavar="RUN_DIR",
        help="scored run or sweep directories of both benchmarks: each image-making plugin that"
        " ran on both, side by side with the published rows (cross.csv, cross.md, cross.png)",
    )
    p.add_argument(
        "--roster",
        choices=("official", "all"),
        default="official",
        help="which published methods to rank: those of the official roster (default) or all "
        "(vistorybench)",
    )
    p.add_argument(
        "--no-published",
        action="store_true",
        help="rank our systems alone, not among the published leaderboard the task ships"
        " (vistorybench)",
    )
    return p


def job_tasks(run_dir: Path | None) -> list[str]:
    """The task names the job manifests of ``run_dir`` (itself, else its children) name, in
    order of first appearance; a manifest without a ``task`` is an Omni-StoryBench job.  Without
    any manifest: the task an evaluation of ``run_dir`` recorded (:func:`evaluated_task`)."""
    from omnistory_core.tasks import DEFAULT_TASK

    if run_dir is None:
        return []
    manifests = [run_dir / "manifest.json"]
    if not manifests[0].is_file():
        manifests = sorted(run_dir.glob("*/manifest.json")) if run_dir.is_dir() else []
    if not manifests:
        recorded = evaluated_task(run_dir)
        return [recorded] if recorded else []
    names: dict[str, None] = {}
    for path in manifests:
        try:
            task = json.loads(path.read_text(encoding="utf-8")).get("task")
        except (OSError, ValueError, AttributeError):
            continue  # an unreadable manifest is the report's to name, not the dispatch's
        name = task.get("name") if isinstance(task, dict) else None
        names[str(name) if name else DEFAULT_TASK] = None
    return list(names)


def evaluated_task(run_dir: Path) -> str | None:
    """The task an evaluation of ``run_dir`` recorded (``systems.json``, written by ``evaluate``:
    an outputs tree scored there has no job manifest to say it); None when there is none."""
    try:
        data = json.loads((run_dir / "systems.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    task = data.get("task") if isinstance(data, dict) else None
    return str(task) if task else None


def report_task(name: str | None, run_dir: Path | None) -> Any:
    """The :class:`~omnistory_core.tasks.Task` whose report to build: ``name``, else the one the
    run's manifests name, else the default task.  UserError: unknown task, or a run that mixes
    tasks with no ``--task`` to choose."""
    from omnistory_core.errors import UserError
    from omnistory_core.plugins import load_plugins
    from omnistory_core.tasks import DEFAULT_TASK

    if name is None:
        found = job_tasks(run_dir)
        if len(found) > 1:
            raise UserError(
                f"{run_dir} holds jobs of several tasks ({', '.join(found)}): choose one"
                " with --task"
            )
        name = found[0] if found else DEFAULT_TASK
    return load_plugins().task(name)


def task_report(task: Any, args: argparse.Namespace) -> int:
    """``report`` of a task with its own report (``Task.report``); bad input is one line, exit 2."""
    from omnistory_core.errors import UserError

    options: dict[str, Any] = {"html": not args.no_html, "roster": args.roster}
    if args.no_published:
        options["published"] = False
    if args.bench_results_csv:
        options["bench_results_csv"] = list(args.bench_results_csv)
    if args.scores is not None and not args.scores.is_file() and args.run_dir is None:
        print(f"error: scores table not found: {args.scores}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    try:
        out = Path(task.report(args.out, scores=args.scores, run_dir=args.run_dir, options=options))
    except (UserError, ValueError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    where = out / "index.html" if not args.no_html else out / "leaderboard.csv"
    print(f"report written to {where} ({time.perf_counter() - start:.1f} s)")
    return 0


def cross_report(run_dirs: list[Path], out: Path) -> int:
    """``report --cross``: runs that cannot be compared are one line, exit 2."""
    from omnistory_core.errors import UserError
    from omnistory_report.cross import CrossError, build_cross

    start = time.perf_counter()
    try:
        written = build_cross(run_dirs, out)
    except (CrossError, UserError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    print(f"cross-benchmark view written to {written / 'cross.md'} ({seconds:.1f} s)")
    return 0


def main(argv: list[str]) -> int:
    """Entry point; ``argv`` excludes the word ``report``.  Returns the exit status."""
    from omnistory_core.errors import UserError

    parser = _parser()
    args = parser.parse_args(argv)
    if args.cross:
        return cross_report(args.cross, args.out)
    try:
        task = report_task(args.task, args.run_dir)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if task.report is not None:
        return task_report(task, args)
    if args.scores is None:
        parser.error("the following arguments are required: --scores")
    if args.bench_results_csv:
        parser.error(f"--bench-results-csv is for tasks with their own report, not {task.name}")
    if args.no_published:
        parser.error(f"--no-published is for tasks with their own report, not {task.name}")
    if args.bootstrap < 1:
        print("error: --bootstrap must be at least 1", file=sys.stderr)
        return 2
    if not args.scores.is_file():
        print(f"error: scores table not found: {args.scores}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    try:
        out = build_report(
            args.scores,
            args.out,
            run_dir=args.run_dir,
            bootstrap=args.bootstrap,
            seed=args.seed,
            html=not args.no_html,
        )
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    where = out / "index.html" if not args.no_html else out / "leaderboard.md"
    print(f"report written to {where} ({time.perf_counter() - start:.1f} s)")
    return 0
