"""Why scripts/test.sh runs every test process with one compute thread (``OMP_NUM_THREADS=1``).

pytest runs two workers on two cores, so while one test computes the other core is nearly always
busy.  A torch (or OpenBLAS, CTranslate2) thread pool sized to the machine then splits each
operation over two threads of which one waits for a core: the whole region waits for the
straggler.  This script measures that on one workload, a small transformer encoder's forward
passes (MiniLM-sized: 6 layers, width 384, 64 tokens, batch 8), each arm in its own process:

* ``alone/default``: the machine idle, torch's default thread count;
* ``busy/default`` and ``busy/1 thread``: one core kept busy by a pure-Python loop (the other
  pytest worker), with the default thread count and with ``OMP_NUM_THREADS=1``.

It prints seconds per arm and the ratios from one run.

    python benchmarks/threads_under_contention.py [--passes 60]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

WORKLOAD = r"""
import json, sys, time
import torch
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(384, 6, 1536, batch_first=True)
model = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).eval()
x = torch.randn(8, 64, 384)
with torch.inference_mode():
    model(x)  # warm-up
    t = time.perf_counter()
    for _ in range(int(sys.argv[1])):
        model(x)
    wall = time.perf_counter() - t
print(json.dumps({"wall": wall, "threads": torch.get_num_threads()}))
"""

BUSY = "import time\nt = time.time()\nwhile time.time() - t < 3600: pass\n"


def arm(passes: int, threads: str | None) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if threads is not None:
        env["OMP_NUM_THREADS"] = threads
    out = subprocess.run(
        [sys.executable, "-c", WORKLOAD, str(passes)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--passes", type=int, default=60)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; {args.passes} forward passes per arm")
    alone = arm(args.passes, None)
    busy = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        time.sleep(0.5)
        busy_default = arm(args.passes, None)
        busy_one = arm(args.passes, "1")
    finally:
        busy.kill()
        busy.wait()
    for name, r in (
        ("alone/default", alone),
        ("busy/default", busy_default),
        ("busy/1 thread", busy_one),
    ):
        print(f"{name:14} {r['wall']:7.2f} s  ({int(r['threads'])} threads)")
    print(
        f"busy/default over alone/default {busy_default['wall'] / alone['wall']:.2f}; "
        f"busy/default over busy/1 thread {busy_default['wall'] / busy_one['wall']:.2f}"
    )


if __name__ == "__main__":
    main()
