"""Engine benchmark: what the content-addressed store saves on a demo grid sweep.

Prints, from one run:
  * model calls of an 8-job grid sweep vs the naive per-configuration count (jobs x examples x 3);
  * the fully cached re-run's wall time as a ratio of the first run;
  * framework overhead per (system, example) with noop components (no model time), cold and cached.

    python benchmarks/engine_sweep.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GRID = ["planner=template,copy", "image=copy,noop", "tts=espeak,noop"]
#: the same grid shape with every model call taking 50 ms, like a (fast) real model would
SLOW_GRID = [
    "planner=noop",
    "image=noop,copy",
    "tts=noop",
    "++planner.delay_s=0.05",
    "++image.delay_s=0.05",
    "++tts.delay_s=0.05",
    "sweep_name=latency",
]


def sweep(root: Path, grid: list[str] = GRID) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "-m",
            *grid,
            "output_root=out",
            "engine.progress=false",
        ],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - t0


def overhead(repeats: int) -> tuple[float, float, int]:
    """Seconds per (system, example) for noop components: fresh store, then fully cached."""
    from omnistory_core.data.cache import load_examples
    from omnistory_core.engine.job import build_component, run_job
    from omnistory_core.engine.store import Store
    from omnistory_core.plugins import load_plugins

    registry = load_plugins()
    examples, _ = load_examples({"name": "demo", "root": None, "limit": None})
    cold, warm = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "store")
            comps = {
                k: build_component(registry, k, {"name": "noop"}, seed=0, allow_oracle=False)
                for k in ("planner", "image", "tts")
            }
            t0 = time.perf_counter()
            run_job(examples=examples, components=comps, store=store)
            cold.append((time.perf_counter() - t0) / len(examples))
            t0 = time.perf_counter()
            run_job(examples=examples, components=comps, store=store)
            warm.append((time.perf_counter() - t0) / len(examples))
    return min(cold), min(warm), len(examples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        first = sweep(root)
        stats = json.loads((root / "out/sweeps/demo/sweep_stats.json").read_text())
        calls = sum(c["calls"] for c in stats["components"].values())
        jobs = stats["jobs"]
        second = sweep(root)
        stats2 = json.loads((root / "out/sweeps/demo/sweep_stats.json").read_text())
        calls2 = sum(c["calls"] for c in stats2["components"].values())
        loads2 = sum(c["loads"] for c in stats2["components"].values())
        slow_first = sweep(root, SLOW_GRID)
        slow_second = sweep(root, SLOW_GRID)
    cold, warm, n = overhead(args.repeats)
    naive = jobs * n * 3
    print(f"grid sweep: {' '.join(GRID)} on the demo ({jobs} jobs x {n} examples)")
    print(
        f"  model calls, first run        : {calls}  (naive per-config: {naive}; "
        f"ratio {calls / naive:.3f})"
    )
    for name, c in stats["components"].items():
        print(f"    {name:<18} calls {c['calls']:>3}  cache hits {c['cache_hits']:>3}")
    print(f"  wall time, first run          : {first:.2f} s")
    print(
        f"  wall time, cached re-run      : {second:.2f} s  (ratio {second / first:.3f}; "
        f"calls {calls2}, model loads {loads2})"
    )
    print(
        f"simulated 50 ms/call: {' '.join(SLOW_GRID[:3])}: first {slow_first:.2f} s, cached"
        f" re-run {slow_second:.2f} s (ratio {slow_second / slow_first:.3f})"
    )
    print(f"framework overhead per (system, example), noop components, best of {args.repeats}:")
    print(f"  cold store                    : {cold * 1000:.2f} ms")
    print(f"  cached                        : {warm * 1000:.2f} ms  (ratio {warm / cold:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
