"""``python -m omnistory_core human``: the human-evaluation round trip of Appendix F.5.

    human export RUN_DIR --out DIR [--window 10] [--seed S] [--start K] [--examples ID ...]
                 [--redundancy 2] [--include-oracles] [--media-url URL]
    human import EXPORT.json --scores SCORES.jsonl [--plan DIR/plan.json]

``export`` writes a Label Studio project (:mod:`.export`); ``import`` adds the ratings of its JSON
export to the scores table as ``kind: human`` rows (:mod:`.import_`), after which ``report`` fills
Tables 18–21.  Exit status 2 on bad input (the message names the file, task and field; nothing is
written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from omnistory_report.human.export import (
    DEFAULT_REDUNDANCY,
    DEFAULT_SEED,
    DEFAULT_WINDOW,
    HumanExportError,
    export_run,
)
from omnistory_report.human.import_ import HumanImportError, import_ratings


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m omnistory_core human",
        description="Human evaluation (Appendix F.5): export a Label Studio project from a run, "
        "import its ratings into the scores table.",
    )
    sub = p.add_subparsers(dest="action", required=True)
    ex = sub.add_parser("export", help="sample the items and write a Label Studio project")
    ex.add_argument("run_dir", type=Path, help="run directory (one folder per system)")
    ex.add_argument("--out", required=True, type=Path, help="folder for the project files")
    ex.add_argument(
        "--window", type=int, default=DEFAULT_WINDOW, help="consecutive transitions (default 10)"
    )
    ex.add_argument("--seed", type=int, default=DEFAULT_SEED, help="window start and task order")
    ex.add_argument("--start", type=int, help="window start (position among common transitions)")
    ex.add_argument("--examples", nargs="+", help="explicit transitions (example ids) instead")
    ex.add_argument(
        "--redundancy",
        type=int,
        default=DEFAULT_REDUNDANCY,
        help="target ratings per item (Label Studio maximum annotations; default 2)",
    )
    ex.add_argument("--include-oracles", action="store_true", help="also rate oracle systems")
    ex.add_argument(
        "--media-url",
        help="URL prefix of OUT/media (default: /data/local-files/?d=<OUT name>/media/)",
    )
    im = sub.add_parser("import", help="add a Label Studio JSON export to the scores table")
    im.add_argument("export", type=Path, help="Label Studio JSON export")
    im.add_argument("--scores", required=True, type=Path, help="scores.jsonl to add the rows to")
    im.add_argument(
        "--plan", type=Path, help="the export's plan.json (default: plan.json next to EXPORT)"
    )
    return p


def main(argv: list[str]) -> int:
    """Entry point; ``argv`` excludes the word ``human``.  Returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.action == "export":
            plan = export_run(
                args.run_dir,
                args.out,
                window=args.window,
                seed=args.seed,
                start=args.start,
                examples=args.examples,
                redundancy=args.redundancy,
                include_oracles=args.include_oracles,
                media_url=args.media_url,
            )
            per_track = len(plan.items) // max(len(plan.tracks), 1)
            print(
                f"wrote {len(plan.items)} tasks ({len(plan.systems)} systems x "
                f"{len(plan.window)} transitions = {per_track} per track x {len(plan.tracks)} "
                f"tracks, target {plan.redundancy} ratings each) to {args.out / 'tasks.json'}"
            )
            return 0
        plan_path = args.plan or args.export.with_name("plan.json")
        summary = import_ratings(args.export, args.scores, plan_path)
        print(
            f"imported {summary.submitted} evaluations ({summary.scored} scored, "
            f"{summary.skipped} skipped or unscored) from {summary.tasks} tasks: "
            f"{summary.rows} human rows in {args.scores}"
        )
        return 0
    except (HumanExportError, HumanImportError, FileNotFoundError, ValueError) as exc:
        print(f"omnistory: error: {exc}", file=sys.stderr)
        return 2
