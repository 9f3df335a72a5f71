"""CPU of the test kit's CLI runs: a new interpreter per run against a run forked from a warm
interpreter (``omnistory_testkit.forkserver``), for the one-example demo run; prints the CPU
seconds per run (the run and what it starts) and their ratio, from one run of this script.

    python benchmarks/cli_fork.py [--runs 8]

The zygotes' own start (once per test process: two interpreters, each importing what a demo run
imports) is measured apart and not counted per run.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile

from omnistory_testkit import forkserver

ARGS = ["planner=template", "image=copy", "tts=noop", "dataset.limit=1"]


def new_interpreters_cpu() -> float:
    """CPU of this process's waited-for children: the runs started as new interpreters."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def forked_runs_cpu() -> float:
    """CPU of the zygotes' waited-for children (``cutime`` + ``cstime``): the forked runs."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for zygote in forkserver._ZYGOTES.pool:
        with open(f"/proc/{zygote.process.pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        total += (int(fields[13]) + int(fields[14])) / ticks
    return total


def cpu_per_run(runs: int, *, fork: bool) -> float:
    os.environ[forkserver.ENABLE_ENV] = "1" if fork else "0"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    clock = forked_runs_cpu if fork else new_interpreters_cpu
    with tempfile.TemporaryDirectory() as tmp:
        if fork:  # both zygotes started and warm before the clock starts
            for _ in range(2):
                forkserver.run_module("omnistory_core", ["--help"], cwd=tmp, env=env, timeout=300)
        before = clock()
        for i in range(runs):
            proc = forkserver.run_module(
                "omnistory_core", [*ARGS, f"output_root=out{i}"], cwd=tmp, env=env, timeout=300
            )
            assert proc.returncode == 0, proc.stderr[-2000:]
        return (clock() - before) / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    runs = parser.parse_args().runs
    fresh = cpu_per_run(runs, fork=False)
    forked = cpu_per_run(runs, fork=True)
    print(
        f"{runs} one-example demo runs each: a new interpreter {fresh:.3f} s of CPU per run,"
        f" forked {forked:.3f} s; forked/new {forked / fresh:.2f}"
    )


if __name__ == "__main__":
    main()
