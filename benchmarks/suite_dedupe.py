"""Distinct generation calls of a paper suite against running it system by system.

Runs ``python -m omnistory_core -m suite=SUITE`` on the demo with every model component replaced
by its stand-in (``omnistory_core.testing.standins``: same names, reads, parameters and presets,
instant deterministic outputs), then reads the store's own statistics (``sweep_stats.json``) and
prints, per role (planner or backbone, image expert, TTS expert):

* distinct calls per example: the model calls the sweep made, divided by the number of examples;
* naive calls per example: one call per system that has that role (what running each system on its
  own, without a shared store, costs);
* then a second, fully cached run of the same command: its calls and model loads (both should be 0).

    python benchmarks/suite_dedupe.py --suite semi [--examples 3]
    python benchmarks/suite_dedupe.py --suite orchestration

Needs the suite's plugins installed (``scripts/test.sh`` installs them all).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROLE = {
    "planner": "planner/backbone",
    "backbone": "planner/backbone",
    "image": "image expert",
    "tts": "TTS expert",
}


def run_suite(root: Path, suite: str, examples: int) -> dict:
    from omnistory_core.testing.standins import make_standin_site

    site = make_standin_site(root / "site")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "-m",
            f"suite={suite}",
            f"dataset.limit={examples}",
            "output_root=out",
            "sweep_name=bench",
            "engine.progress=false",
            "evaluation.report=false",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        env={**_env(), "PYTHONPATH": str(site)},
    )
    if proc.returncode != 0:
        sys.exit(f"the sweep failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads((root / "out" / "sweeps" / "bench" / "sweep_stats.json").read_text())


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def naive_counts(sweep_dir: Path) -> dict[str, int]:
    """Per role: how many systems of the sweep have one (from each job's manifest)."""
    counts = dict.fromkeys(dict.fromkeys(ROLE.values()), 0)
    for manifest in sorted(sweep_dir.glob("*/manifest.json")):
        for group in json.loads(manifest.read_text())["stages"]:
            counts[ROLE[group]] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="semi")
    parser.add_argument("--examples", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        first = run_suite(root, args.suite, args.examples)
        systems = first["jobs"]
        naive = naive_counts(root / "out" / "sweeps" / "bench")
        distinct = dict.fromkeys(naive, 0)
        for key, counts in first["components"].items():
            distinct[ROLE[key.split("/")[0]]] += counts["calls"]
        second = run_suite(root, args.suite, args.examples)
    n = args.examples
    print(f"suite={args.suite}: {systems} systems x {n} demo examples, stand-in components")
    print(f"{'role':<18}{'distinct/example':>18}{'naive/example':>16}{'ratio':>8}")
    for role in naive:
        d, v = distinct[role] / n, naive[role]
        print(f"{role:<18}{d:>18.2f}{v:>16d}{(d / v if v else 0):>8.2f}")
    total_d, total_v = sum(distinct.values()) / n, sum(naive.values())
    print(f"{'total':<18}{total_d:>18.2f}{total_v:>16d}{total_d / total_v:>8.2f}")
    calls = sum(c["calls"] for c in second["components"].values())
    loads = sum(c["loads"] for c in second["components"].values())
    print(f"cached re-run: {calls} calls, {loads} model loads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
