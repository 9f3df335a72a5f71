"""``python -m omnistory_core export --task NAME RUN_DIR --out DIR``: a run directory's scored runs
written in the benchmark's official result formats, by the task that declares an ``export``
(:attr:`omnistory_core.tasks.Task.export`; ViStoryBench: the official ``bench_results`` tree and
``bench_results_{lite,full}.csv``).  The task is ``--task``, else the one the run directory's job
manifests (or its evaluation) name.  Bad input is one line and exit 2."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m omnistory_core export", description=__doc__)
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a scored sweep or run directory")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--task", help="the task of the runs (default: the one the runs name)")
    p.add_argument(
        "--no-outputs",
        action="store_true",
        help="do not put the runs' images into DIR/outputs (the official method-output tree)",
    )
    return p


def main(argv: list[str]) -> int:
    from omnistory_core.errors import UserError
    from omnistory_report.command import report_task

    args = _parser().parse_args(argv)
    if not args.run_dir.is_dir():
        print(f"omnistory export: error: {args.run_dir} is not a directory", file=sys.stderr)
        return 2
    try:
        task = report_task(args.task, args.run_dir)
        if task.export is None:
            raise UserError(f"task {task.name} has no export (no official result format)")
        out = task.export(args.run_dir, args.out, {"outputs": not args.no_outputs})
    except (UserError, ValueError) as exc:
        print(f"omnistory export: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"exported to {out}")
    return 0
