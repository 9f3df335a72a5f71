"""``python -m omnistory_core report``: leaderboard, statistics, figures and the HTML report.

    report --scores PATH --out DIR [--run-dir DIR] [--bootstrap N] [--seed S] [--no-html]

Besides its own tables and figures it writes the paper's numbered ones under their paper names
(``tables/table08_dreamsim_correlations.csv``, ``figures/figure12_...``) with an index
(``tables/index.md``, ``paper_tables.json``): see :mod:`omnistory_report.paper`.

Works on whatever has been scored so far: missing systems, missing examples and partial rows only
make the affected numbers undefined (shown as —), never the report fail.  The end-of-sweep hook
calls :func:`build_report` directly.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from omnistory_report.analysis.bootstrap import DEFAULT_DRAWS, DEFAULT_SEED

_OPTIONS = {
    "bootstrap": DEFAULT_DRAWS,
    "seed": DEFAULT_SEED,
    "weight_draws": 10_000,
    "html": True,
    "print_table": True,
    "console": None,
    "panels": None,
}


def load_examples(runs: dict[str, Any]) -> list | None:
    """Dataset examples for the per-example pages, via the ``dataset`` spec of a manifest.

    Returns None (pages then show outputs and scores only) when no manifest names a dataset.
    """
    specs = [r.manifest.get("dataset") for r in runs.values() if r.manifest.get("dataset")]
    if not specs:
        return None
    from omnistory_core.data import load_dataset  # imported lazily: optional for the report

    return list(load_dataset(specs[0]))


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
    (explicit judge panels for the agreement tables).  ``examples`` are the dataset's
    StoryExamples; when omitted and ``run_dir`` is given they are loaded from a manifest's
    ``dataset`` spec.
    """
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise TypeError(f"build_report got unknown options: {sorted(unknown)}")
    opt = {**_OPTIONS, **options}

    from omnistory_report import figures as fig
    from omnistory_report.analysis.correlations import correlation_matrix
    from omnistory_report.analysis.cube import build_cube
    from omnistory_report.analysis.failures import failure_table, plan_error_counts
    from omnistory_report.analysis.frame import load_scores_frame
    from omnistory_report.analysis.human import HumanStudy, read_plan_sidecar, split_human
    from omnistory_report.analysis.leaderboard import leaderboard, modality_frame
    from omnistory_report.analysis.statistics import StatisticsOptions, compute_statistics
    from omnistory_report.paper import write_paper_outputs
    from omnistory_report.rundir import (
        failures_frame,
        lengths_frame,
        outputs_frame,
        read_run_dir,
        system_info,
    )
    from omnistory_report.tables import write_leaderboard, write_table
    from omnistory_report.terminal import print_leaderboard

    scores_path, out_dir = Path(scores_path), Path(out_dir)
    notes = []
    if scores_path.is_file() or run_dir is None:
        frame = load_scores_frame(scores_path)
    else:
        # A sweep run without evaluation: the pages still show every system's outputs.
        from omnistory_report.analysis.frame import frame_from_rows

        frame = frame_from_rows([])
    # Human ratings (``human import``) feed Tables 18-21 only, never the leaderboard.
    frame, human_rows = split_human(frame)
    human = HumanStudy(human_rows, read_plan_sidecar(scores_path)) if not human_rows.empty else None
    out_dir.mkdir(parents=True, exist_ok=True)
    cube = build_cube(frame, source=str(scores_path))
    lb = leaderboard(cube)

    runs = read_run_dir(run_dir) if run_dir is not None else {}
    unscored = sorted(set(runs) - set(cube.systems))
    if unscored and cube.systems:
        notes.append(f"Systems in the run directory without scores yet: {', '.join(unscored)}.")
    if examples is None and runs:
        try:
            examples = load_examples(runs)
        except Exception as exc:  # noqa: BLE001 - the report must still build without the dataset
            notes.append(f"Dataset examples could not be loaded ({exc}); pages show outputs only.")
            examples = None
    info = system_info(runs, list(cube.systems) + unscored)
    paradigms = {s: p for s, p in info["paradigm"].items() if p != "unknown"} or None
    oracles = sorted(s for s, o in info["oracle"].items() if o)
    comparable = lb[~lb["system"].isin(oracles)]

    failures = failures_frame(runs) if runs else pd.DataFrame()
    lengths = lengths_frame(runs) if runs else None
    reference_lengths = None
    if examples:
        from omnistory_report.analysis.length import narration_length

        reference_lengths = [narration_length(e.reference.next_page.text) for e in examples]

    write_leaderboard(lb, info, out_dir)
    if opt["print_table"]:
        print_leaderboard(lb, info, opt["console"])

    stats = compute_statistics(
        frame,
        cube,
        lb,
        paradigms=paradigms,
        lengths=lengths,
        reference_lengths=reference_lengths,
        options=StatisticsOptions(
            draws=int(opt["bootstrap"]),
            seed=int(opt["seed"]),
            weight_draws=int(opt["weight_draws"]),
            panels=opt["panels"],
        ),
        exclude=oracles,
    )
    n_error = int(cube.errors.any(axis=0).sum())
    incomplete = ""
    if n_error:
        # every number below leaves these examples out of the affected cells: say so everywhere
        incomplete = (
            f"Incomplete: {n_error} (system, example) pair(s) have evaluator errors (status "
            "`error`: the evaluator could not answer); the affected cells are computed without "
            "them, neither as valid nor as zero (see `errors_*` in the leaderboard and `n_error` "
            "in judge_coverage). Rerun `evaluate` once the cause is fixed."
        )
        notes.append(incomplete)
        stats = {
            k: replace(t, note=f"{t.note}\n\n{incomplete}" if t.note else incomplete)
            for k, t in stats.items()
        }
    tables_dir = out_dir / "tables"
    table_links = []
    if not failures.empty:
        stats["failures"] = _failures_stat(failure_table(failures))
    for stem, table in stats.items():
        write_table(table.frame, tables_dir, stem, table.title, table.note)
        table_links.append((table.title, stem))

    fig_dir = out_dir / "figures"
    produced = outputs_frame(runs)
    left_out = f" (oracle systems left out: {', '.join(oracles)})" if oracles else ""
    plan_errors = plan_error_counts(failures) if runs else None
    criteria_image = stats.get("criterion_scores_image")
    criteria_frame = (
        criteria_image.frame.set_index("system").drop(index=oracles, errors="ignore")
        if criteria_image is not None
        else pd.DataFrame()
    )
    figures = [
        ("Figure 3: Total Average ranking by paradigm", fig.ranking_figure(lb, info, fig_dir)),
        (
            "Figure 4: JSON errors and missing outputs per modality",
            fig.missing_figure(
                lb if not lb.empty else _missing_from_runs(produced), info, fig_dir, plan_errors
            ),
        ),
        ("Figure 13: valid-only vs zero-filled", fig.valid_vs_zero_figure(lb, info, fig_dir)),
        (
            "Modality correlation heatmap (valid-only)" + left_out,
            fig.correlation_heatmap(
                correlation_matrix(
                    modality_frame(comparable, "valid").dropna(),
                    ["text", "image", "speech", "omni", "total"],
                ),
                fig_dir,
            ),
        ),
        (
            "Figure 6: image-judge scores by category and paradigm" + left_out,
            fig.image_categories_figure(criteria_frame, info, fig_dir),
        ),
    ]
    # The paper's numbered tables and figures under their paper names, with their index.
    paper = write_paper_outputs(
        out_dir,
        frame,
        cube,
        lb,
        stats,
        info,
        paradigms=paradigms,
        lengths=lengths,
        exclude=oracles,
        incomplete=incomplete,
        human=human,
    )
    table_links.extend(paper.tables)
    figures.extend(paper.figures)
    if lengths is not None and not lengths.empty:
        figures.insert(
            0,
            (
                "Generated narration length per system (characters)",
                fig.length_figure(lengths, info, fig_dir, reference_lengths),
            ),
        )
    # the HTML shows only what has data; the files are all written (the paper index names them)
    figures = [(t, p) for t, p in figures if fig.empty_reason(p) is None]
    table_links = [(t, s) for t, s in table_links if _has_data(tables_dir / f"{s}.csv")]

    if opt["html"]:
        from omnistory_report.html import ReportContext, write_html_report

        inline = [
            (stats[k].title, stats[k].frame)
            for k in (
                "bootstrap_totals",
                "bottleneck_valid",
                "bottleneck_zero",
                "paradigm_means",
                "partial_correlations_valid",
            )
            if k in stats and _frame_has_data(stats[k].frame)
        ]
        excluded = stats["judge_coverage"].frame
        excluded = excluded[excluded["excluded_valid_only"]]
        if not excluded.empty:
            inline.insert(0, ("Judges left out of valid-only means (no valid example)", excluded))
        if n_error:
            from omnistory_report.analysis.leaderboard import cell_means

            erred = cell_means(cube)
            erred = erred[erred["n_error"] > 0][
                ["system", "kind", "track", "evaluator", "n_examples", "n_error"]
            ]
            inline.insert(0, ("Evaluator errors (examples left out of these cells)", erred))
        write_html_report(
            ReportContext(
                out_dir=out_dir,
                lb=lb,
                info=info,
                cube=cube,
                frame=frame,
                figures=figures,
                tables=table_links,
                inline_tables=inline,
                runs=runs,
                examples=examples,
                notes=notes,
                run_tables=_run_tables(runs, produced, lengths, reference_lengths),
                scores_note=_scores_note(scores_path, run_dir) if lb.empty else "",
            )
        )
    return out_dir


def _missing_from_runs(produced: pd.DataFrame) -> pd.DataFrame:
    """Figure 4's input from the run records: outputs not written per system and modality."""
    if produced.empty:
        return pd.DataFrame(columns=["system", "missing_text", "missing_image", "missing_speech"])
    missing = produced.assign(missing=produced["examples"] - produced["written"])
    wide = missing.pivot(index="system", columns="modality", values="missing")
    return pd.DataFrame(
        {
            "system": wide.index,
            **{f"missing_{m}": wide[m].to_numpy(int) for m in ("text", "image", "speech")},
        }
    )


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


def _failures_stat(table: pd.DataFrame):
    from omnistory_report.analysis.statistics import StatTable

    return StatTable("Failed outputs per system, modality and category (run records)", table)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m omnistory_core report",
        description="Leaderboard (valid-only and zero-filled), statistics, figures and the HTML "
        "report from a scores table.",
    )
    p.add_argument("--scores", required=True, type=Path, help="scores.jsonl")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--run-dir", type=Path, help="run directory (system folders) for the HTML pages")
    p.add_argument("--bootstrap", type=int, default=DEFAULT_DRAWS, help="bootstrap draws")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed")
    p.add_argument("--no-html", action="store_true", help="skip the HTML report")
    return p


def main(argv: list[str]) -> int:
    """Entry point; ``argv`` excludes the word ``report``.  Returns the exit status."""
    args = _parser().parse_args(argv)
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
