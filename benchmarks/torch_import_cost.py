"""CPU seconds a fresh interpreter spends importing torch (and torchvision) in several Python
environments, and the ratios to the first one: the cost every test subprocess that imports
torch would pay for a change of torch build.

    python benchmarks/torch_import_cost.py .venv/bin/python /tmp/other/bin/python [...]
    python benchmarks/torch_import_cost.py --runs 9 --modules torch,torchvision PY [PY ...]

Each figure is the median CPU time (user + system, so a busy machine inflates it less than the
wall clock) of ``--runs`` fresh ``python -c "import ..."`` processes, one thread each; an
environment where a module does not import is reported as such.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess


def cpu_seconds(python: str, modules: str) -> float | None:
    """CPU time of one fresh process importing ``modules``; None when the import fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [python, "-c", f"import {modules}"],
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        return None
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def version(python: str, module: str) -> str:
    done = subprocess.run(
        [python, "-c", f"import {module}; print({module}.__version__)"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() if done.returncode == 0 else "does not import"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pythons", nargs="+", help="interpreters; the first is the baseline")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--modules", default="torch;torch,torchvision")
    args = parser.parse_args()
    for modules in args.modules.split(";"):
        baseline: float | None = None
        for python in args.pythons:
            subprocess.run([python, "-c", f"import {modules}"], capture_output=True)  # warm
            times = [cpu_seconds(python, modules) for _ in range(args.runs)]
            found = [t for t in times if t is not None]
            torch, vision = version(python, "torch"), version(python, "torchvision")
            label = f"{python} (torch {torch}, torchvision {vision})"
            if len(found) < len(times):
                print(f"import {modules}: {label}: does not import")
                continue
            median = statistics.median(found)
            baseline = median if baseline is None else baseline
            print(
                f"import {modules}: {label}: median {median:.3f} CPU s"
                f" (min {min(found):.3f}), ratio to the first {median / baseline:.2f}"
            )


if __name__ == "__main__":
    main()
