"""A sweep on k devices against one device: wall time, model loads, duplicates, outputs, scores.

Runs the 8-job grid ``-m planner=claude,gpt image=kontext,dev tts=parler,voxcpm`` on the demo with
every model component replaced by its stand-in (``omnistory_testkit.standins``: same names,
reads, parameters and GPU needs; deterministic outputs) that sleeps ``--delay`` seconds per call
and ``--load-delay`` seconds per model load (GPU components only), with ``engine.devices=[0]``,
``[0,1]``, ``[0,1,2,3]``: k processes standing in for k GPUs (an id in ``engine.devices`` is only a
name handed to a worker; nothing needs a real GPU).  For each k, on a fresh output root:

1. the dry run of the same command (``engine.dry_run=true``): the distinct calls it plans;
2. the sweep itself, timed as a whole process, with the sweep's warm pool (``engine.warm_pool``:
   each model loaded once per device for the whole sweep);
3. from the store, the stand-ins' call and load logs: distinct calls made, calls made twice (must
   be 0), model loads made and the distinct (component, device) pairs they were made on (equal
   with the warm pool), and a digest of every generated file of every job (must equal k = 1's).

With the warm pool the sweep's scheduler places every replica (``engine.scheduler``,
:mod:`omnistory_core.engine.schedule`).  Then the largest k once more without the warm pool
(``engine.warm_pool=false``: every job's stage starts and loads its own replicas, no scheduler),
for the loads that costs (``--no-today`` skips it).

Prints one row per k: wall time, speed-up against k = 1 and efficiency (speed-up / k), planned and
made calls, loads and pairs; and last, exactly one line::

    k=4 efficiency 0.93 loads 9 pairs 9 duplicates 0 digests same

(efficiency at the largest k against k = 1, loads made in that run, distinct (component, device)
pairs it used, calls made twice over every run, outputs equal to k = 1's or not).  The hosted
planners (gpt, claude) use no GPU: they run in the jobs' own processes.

``--evaluate``: the sweep also scores itself (``evaluation.metrics=[clip]``,
``evaluation.judges=[text-qwen3-30b-a3b]``, a metric and a judge that need a GPU, replaced by their
stand-ins too: ``make_standin_site(..., evaluators=True)``), on the sweep's devices: the items
whose outputs are final while generation goes on (``engine.evaluate_sooner``), the rest at its
end.  Their calls and loads count in every figure (planned, made, twice, loads, pairs), and the
digest covers the scores table too (must equal k = 1's).  The stand-in evaluators take one item
per chunk (``batch_size=1``): the sweep's handful of items per evaluator would otherwise be one
chunk, which no number of devices shares.  The line "evaluation" gives the time from the last
generation call to the last evaluator call (the evaluation's tail).

``--timeline [DIR]``: where each device's time went, per k (:mod:`timeline`): in ``DIR``
(default ``devices-timeline``) ``timeline-k<k>.csv`` (per device every load, call and idle gap,
seconds since the sweep started, an idle gap's cause) and ``timeline-k<k>.png`` (its Gantt chart),
and printed per k the device-seconds of the sweep (k x wall), those in calls and those without
a call by cause: loading, waiting for plans, waiting for a stage barrier, not worth a load, no
work.

    python benchmarks/devices_scaling.py [--delay 2.0] [--load-delay 5] [--examples 10]
        [--devices 1,2,4] [--no-today] [--evaluate] [--timeline [DIR]] [OVERRIDE ...]

``OVERRIDE``: config overrides given to every sweep, e.g. ``engine.scheduler=false
engine.evaluate_sooner=false`` for the figures without the sweep's scheduler (each stage leases
devices itself, everything is scored after the last job).
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

from timeline import CAUSES, call_seconds, device_spans, seconds_by_cause, write_csv, write_png

GRID = ("-m", "planner=claude,gpt", "image=kontext,dev", "tts=parler,voxcpm")
METRIC, JUDGE = "clip", "text-qwen3-30b-a3b"
#: the end-of-sweep evaluation of ``--evaluate`` (one item per chunk: see the module docstring)
EVALUATION = (
    f"evaluation.metrics=[{METRIC}]",
    f"evaluation.judges=[{JUDGE}]",
    f"evaluation.overrides=['metric.{METRIC}.batch_size=1','judge.{JUDGE}.batch_size=1']",
)


def _env(root: Path, site: Path, delay: float, load_delay: float) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "OMNISTORY_STANDIN_DELAY_S": str(delay),
        "OMNISTORY_STANDIN_LOG": str(root / "calls.jsonl"),
        "OMNISTORY_STANDIN_LOAD_S": str(load_delay),
        "OMNISTORY_STANDIN_LOAD_LOG": str(root / "loads.jsonl"),
        "OMNISTORY_DEVICE_LOCKS": str(root / "device-locks"),
        "OPENAI_API_KEY": "benchmark",
        "ANTHROPIC_API_KEY": "benchmark",
    }


def _run(root: Path, env: dict[str, str], *extra: str) -> tuple[float, float]:
    """Run the sweep; its (start, end) in epoch seconds."""
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "omnistory_core", *GRID, *extra],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    t1 = time.time()
    if proc.returncode != 0:
        sys.exit(
            f"the sweep failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}"
        )
    return t0, t1


def _outputs(sweep: Path) -> str:
    """A digest of every generated file of every job and of the scores table (when scored)."""
    digest = hashlib.sha256()
    paths = sorted(sweep.glob("*/*/*/generated.*"))
    for path in [*paths, *([sweep / "scores.jsonl"] if (sweep / "scores.jsonl").exists() else [])]:
        digest.update(str(path.relative_to(sweep)).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _is_evaluator(entry: dict) -> bool:
    return entry["component"].split("/")[0] in ("metric", "judge")


def _evaluation_seconds(calls: list[dict]) -> float | None:
    """The end-of-sweep evaluation's share of the wall time, from the stand-ins' call log: the
    last evaluator call's end less the last generation call's (None: nothing scored)."""
    scored = [c["end"] for c in calls if _is_evaluator(c)]
    generated = [c["end"] for c in calls if not _is_evaluator(c)]
    if not scored or not generated:
        return None
    return max(scored) - max(generated)


def _calls_made(sweep: Path) -> int:
    """Calls the sweep made: its jobs' (``sweep_stats.json``) and its evaluation's."""
    stats = json.loads((sweep / "sweep_stats.json").read_text())
    made = sum(c["calls"] for c in stats["components"].values())
    scored = sweep / "evaluation_stats.json"
    if scored.exists():
        made += sum(c["calls"] for c in json.loads(scored.read_text())["components"].values())
    return made


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def measure(
    base: Path,
    site: Path,
    k: int,
    delay: float,
    load_delay: float,
    examples: int,
    warm: bool = True,
    evaluate: bool = False,
    overrides: tuple[str, ...] = (),
) -> dict:
    root = base / f"k{k}{'' if warm else '-today'}"
    root.mkdir()
    env = _env(root, site, delay, load_delay)
    devices = f"engine.devices=[{','.join(str(i) for i in range(k))}]"
    common = (
        devices,
        f"dataset.limit={examples}",
        "output_root=out",
        "sweep_name=bench",
        "engine.progress=false",
        "evaluation.report=false",
        f"engine.warm_pool={str(warm).lower()}",
        *(EVALUATION if evaluate else ()),
        *overrides,
    )
    _run(root, env, *common, "engine.dry_run=true")
    plan = json.loads((root / "out/sweeps/bench/sweep_plan.json").read_text())
    t0, t1 = _run(root, env, *common)
    calls = _lines(root / "calls.jsonl")
    made = Counter(c["digest"] for c in calls)
    loads = _lines(root / "loads.jsonl")
    return {
        "k": k,
        "warm": warm,
        "wall": t1 - t0,
        "spans": device_spans(calls, loads, [str(i) for i in range(k)], t0, t1),
        "planned": plan["total"]["calls"],
        "calls": _calls_made(root / "out/sweeps/bench"),
        "records": len(list((root / "out/store/calls").rglob("*.json"))),
        "twice": sum(1 for n in made.values() if n > 1),
        "loads": len(loads),
        "pairs": len({(e["component"], e["devices"]) for e in loads}),
        "evaluation_s": _evaluation_seconds(calls),
        "evaluator_loads": sum(1 for e in loads if _is_evaluator(e)),
        "outputs": _outputs(root / "out/sweeps/bench"),
    }


def _timeline(rows: list[dict], directory: Path, title: str) -> None:
    """Per k: the CSV and Gantt chart of its devices' time, and device-seconds by cause."""
    directory.mkdir(parents=True, exist_ok=True)
    print(f"device time (device-seconds; timelines in {directory}):")
    print(
        f"{'k':>8} {'k x wall':>9} {'calls':>7} "
        + " ".join(f"{c:>{max(8, len(c))}}" for c in CAUSES)
    )
    for row in rows:
        name = f"k{row['k']}{'' if row['warm'] else '-today'}"
        write_csv(directory / f"timeline-{name}.csv", row["spans"])
        write_png(directory / f"timeline-{name}.png", row["spans"], f"{title}; {name}")
        causes = seconds_by_cause(row["spans"])
        print(
            f"{name:>8} {row['k'] * row['wall']:>9.1f} {call_seconds(row['spans']):>7.1f} "
            + " ".join(f"{causes[c]:>{max(8, len(c))}.1f}" for c in CAUSES)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=2.0, help="seconds per stand-in call")
    parser.add_argument(
        "--load-delay", type=float, default=5.0, help="seconds per model load (GPU stand-ins)"
    )
    parser.add_argument("--examples", type=int, default=10, help="demo examples (at most 10)")
    parser.add_argument("--devices", default="1,2,4", help="values of k, comma-separated")
    parser.add_argument(
        "--no-today", action="store_true", help="skip the largest k without the warm pool"
    )
    parser.add_argument(
        "--evaluate", action="store_true", help="the end-of-sweep evaluation too (see the doc)"
    )
    parser.add_argument(
        "--timeline",
        nargs="?",
        const="devices-timeline",
        metavar="DIR",
        help="write per k the devices' timeline (CSV, PNG) to DIR and print idle time by cause",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        help="config overrides for every sweep (engine.scheduler=false"
        " engine.evaluate_sooner=false: each stage leasing devices itself, everything scored after"
        " the last job)",
    )
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.devices.split(",")]
    from omnistory_testkit.standins import make_standin_site

    with tempfile.TemporaryDirectory(prefix="omnistory-devices-") as tmp:
        base = Path(tmp)
        site = make_standin_site(base / "site", evaluators=args.evaluate)
        timing = (args.delay, args.load_delay, args.examples)
        extra = tuple(args.overrides)
        rows = [
            measure(base, site, k, *timing, evaluate=args.evaluate, overrides=extra) for k in ks
        ]
        today = None
        if not args.no_today:
            today = measure(
                base, site, ks[-1], *timing, warm=False, evaluate=args.evaluate, overrides=extra
            )
    first, last = rows[0], rows[-1]
    print(
        f"8-job grid {' '.join(GRID[1:])}, {args.examples} examples, stand-ins sleeping"
        f" {args.delay:g} s per call and {args.load_delay:g} s per load; one run per k on"
        f" {os.cpu_count()} CPU cores"
    )
    if args.evaluate:
        print(
            f"with the end-of-sweep evaluation: metric={METRIC} and judge={JUDGE} (stand-ins,"
            " one GPU each, batch_size=1) on the sweep's devices; every figure includes it and"
            " the outputs digest covers scores.jsonl"
        )
    if extra:
        print(f"every sweep with {' '.join(extra)}")
    print(
        f"{'k':>3} {'wall s':>8} {'speed-up':>9} {'per k':>6} {'planned':>8} {'calls':>6}"
        f" {'records':>8} {'twice':>6} {'loads':>6} {'pairs':>6}"
        f" {'outputs = k=' + str(first['k']):>14}"
    )
    for row in rows:
        speed = first["wall"] / row["wall"] * first["k"]
        print(
            f"{row['k']:>3} {row['wall']:>8.1f} {speed:>9.2f} {speed / row['k']:>6.2f}"
            f" {row['planned']:>8} {row['calls']:>6} {row['records']:>8} {row['twice']:>6}"
            f" {row['loads']:>6} {row['pairs']:>6} {str(row['outputs'] == first['outputs']):>14}"
        )
    if args.evaluate and all(r["evaluation_s"] for r in rows):
        phases = ", ".join(
            f"k={r['k']} {r['evaluation_s']:.1f} s ({r['evaluator_loads']} evaluator loads)"
            for r in rows
        )
        print(
            f"evaluation (last generation call to last evaluator call): {phases};"
            f" speed-up {first['evaluation_s'] / last['evaluation_s']:.2f} at k={last['k']}"
        )
    if today is not None:
        print(
            f"k={today['k']} without the warm pool (today): wall {today['wall']:.1f} s,"
            f" loads {today['loads']} on {today['pairs']} (component, device) pairs"
            f" (warm pool: {last['loads']}); outputs = k={first['k']}:"
            f" {today['outputs'] == first['outputs']}"
        )
    everything = [*rows, *([today] if today else [])]
    if args.timeline:
        title = (
            f"{args.examples} examples, {args.delay:g} s per call, {args.load_delay:g} s per load"
            f"{', with the evaluation' if args.evaluate else ''}"
        )
        _timeline(everything, Path(args.timeline), title)
    exact = all(r["planned"] == r["calls"] == r["records"] for r in everything)
    same = all(r["outputs"] == first["outputs"] for r in everything)
    duplicates = sum(r["twice"] for r in everything)
    print(f"dry-run estimate = calls made = store records: {exact}")
    efficiency = first["wall"] / last["wall"] * first["k"] / last["k"]
    print(
        f"k={last['k']} efficiency {efficiency:.2f} loads {last['loads']} pairs {last['pairs']}"
        f" duplicates {duplicates} digests {'same' if same else 'differ'}"
    )
    ok = exact and same and not duplicates and last["loads"] == last["pairs"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
