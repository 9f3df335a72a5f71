"""A sweep on k devices against one device: wall time, distinct calls, duplicates, outputs.

Runs the 8-job grid ``-m planner=claude,gpt image=kontext,dev tts=parler,voxcpm`` on the demo with
every model component replaced by its stand-in (``omnistory_testkit.standins``: same names,
reads, parameters and GPU needs; deterministic outputs) that sleeps ``--delay`` seconds per call,
with ``engine.devices=[0]``, ``[0,1]``, ``[0,1,2,3]``: k processes standing in for k GPUs (an id
in ``engine.devices`` is only a name handed to a worker; nothing needs a real GPU).  For each k,
on a fresh output root:

1. the dry run of the same command (``engine.dry_run=true``): the distinct calls it plans;
2. the sweep itself, timed as a whole process;
3. from the store and the stand-ins' call log: distinct calls made, calls made twice (must be 0),
   and a digest of every generated file of every job (must equal k = 1's).

Prints one row per k: wall time, speed-up against k = 1 and efficiency (speed-up / k), planned and
made calls.  The hosted planners (gpt, claude) use no GPU: they run in the jobs' own processes,
so the planning stage scales with the number of jobs at once (one per device), the image and TTS
stages with the replicas.

    python benchmarks/devices_scaling.py [--delay 2.0] [--examples 10] [--devices 1,2,4]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

GRID = ("-m", "planner=claude,gpt", "image=kontext,dev", "tts=parler,voxcpm")


def _env(root: Path, site: Path, delay: float) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "OMNISTORY_STANDIN_DELAY_S": str(delay),
        "OMNISTORY_STANDIN_LOG": str(root / "calls.jsonl"),
        "OMNISTORY_DEVICE_LOCKS": str(root / "device-locks"),
        "OPENAI_API_KEY": "benchmark",
        "ANTHROPIC_API_KEY": "benchmark",
    }


def _run(root: Path, env: dict[str, str], *extra: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "omnistory_core", *GRID, *extra],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(
            f"the sweep failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}"
        )
    return wall


def _outputs(sweep: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(sweep.glob("*/*/*/generated.*")):
        digest.update(str(path.relative_to(sweep)).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def measure(base: Path, site: Path, k: int, delay: float, examples: int) -> dict:
    root = base / f"k{k}"
    root.mkdir()
    env = _env(root, site, delay)
    devices = f"engine.devices=[{','.join(str(i) for i in range(k))}]"
    common = (
        devices,
        f"dataset.limit={examples}",
        "output_root=out",
        "sweep_name=bench",
        "engine.progress=false",
        "evaluation.report=false",
    )
    _run(root, env, *common, "engine.dry_run=true")
    plan = json.loads((root / "out/sweeps/bench/sweep_plan.json").read_text())
    wall = _run(root, env, *common)
    stats = json.loads((root / "out/sweeps/bench/sweep_stats.json").read_text())
    calls = [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]
    made = Counter(c["digest"] for c in calls)
    return {
        "k": k,
        "wall": wall,
        "planned": plan["total"]["calls"],
        "calls": sum(c["calls"] for c in stats["components"].values()),
        "records": len(list((root / "out/store/calls").rglob("*.json"))),
        "twice": sum(1 for n in made.values() if n > 1),
        "outputs": _outputs(root / "out/sweeps/bench"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=2.0, help="seconds per stand-in call")
    parser.add_argument("--examples", type=int, default=10, help="demo examples (at most 10)")
    parser.add_argument("--devices", default="1,2,4", help="values of k, comma-separated")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.devices.split(",")]
    from omnistory_testkit.standins import make_standin_site

    with tempfile.TemporaryDirectory(prefix="omnistory-devices-") as tmp:
        base = Path(tmp)
        site = make_standin_site(base / "site")
        rows = [measure(base, site, k, args.delay, args.examples) for k in ks]
    first = rows[0]
    print(
        f"8-job grid {' '.join(GRID[1:])}, {args.examples} examples, stand-ins sleeping"
        f" {args.delay:g} s per call; one run per k on {os.cpu_count()} CPU cores"
    )
    print(
        f"{'k':>3} {'wall s':>8} {'speed-up':>9} {'per k':>6} {'planned':>8} {'calls':>6}"
        f" {'records':>8} {'twice':>6} {'outputs = k=' + str(first['k']):>14}"
    )
    for row in rows:
        speed = first["wall"] / row["wall"] * first["k"]
        print(
            f"{row['k']:>3} {row['wall']:>8.1f} {speed:>9.2f} {speed / row['k']:>6.2f}"
            f" {row['planned']:>8} {row['calls']:>6} {row['records']:>8} {row['twice']:>6}"
            f" {str(row['outputs'] == first['outputs']):>14}"
        )
    exact = all(r["planned"] == r["calls"] == r["records"] for r in rows)
    same = all(r["outputs"] == first["outputs"] for r in rows)
    print(
        f"dry-run estimate = calls made = store records: {exact}; outputs byte-identical: {same};"
        f" calls made twice: {sum(r['twice'] for r in rows)}"
    )
    return 0 if exact and same and not any(r["twice"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
