"""Report benchmark: leaderboard + statistics at paper scale must stay interactive.

Synthetic scores table for 32 systems x 900 examples x the full row set (BERTScore 1 row, CLIP 1
row, speech metadata 4 rows; 12 judges x 4 criteria = 54 rows per system and example, 1,555,200
rows), then times each step of the report:

  * loading scores.jsonl into the validated frame;
  * the per-example cube + both leaderboard policies;
  * all statistics (paired bootstrap with the stated draws, weight sweeps, diagnostics, agreement);
  * the whole ``build_report`` (tables, figures, optionally the HTML pages) from the file.

    python benchmarks/report_scale.py [--systems 32] [--examples 900] [--draws 20000] [--html]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


class Timer:
    """Wall-clock and process CPU seconds (all threads) of a block."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def __str__(self) -> str:
        return f"{self.wall:7.2f} s wall {self.cpu:7.2f} s CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=32)
    parser.add_argument("--examples", type=int, default=900)
    parser.add_argument("--judges-per-track", type=int, default=3)
    parser.add_argument("--draws", type=int, default=20_000, help="bootstrap draws")
    parser.add_argument("--weight-draws", type=int, default=10_000)
    parser.add_argument("--html", action="store_true", help="also time the HTML pages")
    args = parser.parse_args()

    # Import scipy and matplotlib before timing: one-off costs, not per report.
    import matplotlib.figure  # noqa: F401
    import scipy.stats  # noqa: F401
    from omnistory_report.analysis import (
        StatisticsOptions,
        build_cube,
        compute_statistics,
        leaderboard,
        load_scores_frame,
    )
    from omnistory_report.analysis.synthetic import synthetic_scores, write_scores_frame
    from omnistory_report.command import build_report

    paradigms = ("orchestration", "semi-orchestration", "any-to-any", "baseline")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        frame = synthetic_scores(args.systems, args.examples, args.judges_per_track, seed=0)
        path = write_scores_frame(frame, Path(tmp) / "scores.jsonl")
        setup = time.perf_counter() - t0
        size_mb = path.stat().st_size / 1e6

        with Timer() as t_load:
            frame = load_scores_frame(path)
        with Timer() as t_lb:
            cube = build_cube(frame)
            lb = leaderboard(cube)

        options = StatisticsOptions(draws=args.draws, weight_draws=args.weight_draws)
        para = {s: paradigms[i % 4] for i, s in enumerate(cube.systems)}
        with Timer() as t_stats:
            stats = compute_statistics(frame, cube, lb, paradigms=para, options=options)

        from omnistory_report.analysis.bootstrap import paired_bootstrap

        with Timer() as t_boot:
            paired_bootstrap(cube, args.draws)
        with Timer() as t_report:
            build_report(
                path,
                Path(tmp) / "report",
                bootstrap=args.draws,
                weight_draws=args.weight_draws,
                html=args.html,
                print_table=False,
            )

    rows_per = 6 + 4 * args.judges_per_track * 4
    print(
        f"synthetic table: {args.systems} systems x {args.examples} examples x {rows_per} rows"
        f" = {len(frame):,} rows, {size_mb:.0f} MB (generated and written in {setup:.1f} s)"
    )
    print(f"bootstrap draws: {args.draws:,} (seed 20260925); weight draws: {args.weight_draws:,}")
    both = (t_lb.wall + t_stats.wall, t_lb.cpu + t_stats.cpu)
    print(f"  load scores.jsonl              {t_load}")
    print(f"  cube + leaderboard             {t_lb}")
    print(f"  statistics ({len(stats)} tables)        {t_stats}")
    print(f"    of which paired bootstrap    {t_boot}")
    print(f"  leaderboard + statistics       {both[0]:7.2f} s wall {both[1]:7.2f} s CPU")
    label = "with HTML pages" if args.html else "without HTML"
    print(f"  whole build_report             {t_report}   ({label}; load, tables, figures)")
    print(f"  machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
