"""Distinct generation calls of a paper suite against running it system by system.

Runs ``python -m omnistory_core -m suite=SUITE`` on the demo with every model component replaced
by its stand-in (``omnistory_testkit.standins``: same names, reads, parameters and presets,
instant deterministic outputs), then reads the store's own statistics (``sweep_stats.json``) and
prints, per role (planner or backbone, image expert, TTS expert):

* distinct calls per example: the model calls the sweep made, divided by the number of examples;
* naive calls per example: one call per system that has that role (what running each system on its
  own, without a shared store, costs);
* then a second, fully cached run of the same command: its calls and model loads (both should be 0).

Then it evaluates the sweep through the real ``evaluate`` command with one judge per track (the
hosted judges, served by a local OpenAI-compatible server on 127.0.0.1 that answers every
criterion) and prints, per judge, the distinct judge calls per example
(``evaluation_stats.json``) against one call per system, and the calls of a second, cached
evaluation (should be 0).

    python benchmarks/suite_dedupe.py --suite semi [--examples 3]
    python benchmarks/suite_dedupe.py --suite orchestration
    python benchmarks/suite_dedupe.py --suite paper32 --examples 2

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
    from omnistory_testkit.standins import make_standin_site

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


#: one judge per track; the hosted judges speak the OpenAI protocol to the local server
JUDGES = {
    "text": "text-hosted",
    "image": "image-hosted",
    "speech": "speech-hosted",
    "omni": "omni-hosted",
}


def evaluate_sweep(root: Path) -> dict:
    """Run ``evaluate`` on the sweep against a local judge server; its evaluation_stats.json."""
    from omnistory_eval.judges import CRITERIA
    from omnistory_testkit import LocalChatServer, Reply

    def answer(body: dict) -> Reply:
        track = body["model"]  # each judge below is configured with its track as the model name
        return Reply(
            content=json.dumps({c: {"score": 7, "rationale": "stand-in"} for c in CRITERIA[track]})
        )

    with LocalChatServer(answer) as server:
        sets = []
        for track, judge in JUDGES.items():
            sets += [
                "--set",
                f"judge.{judge}.base_url={server.base_url}",
                "--set",
                f"judge.{judge}.model={track}",
                # every stand-in answer parses; without this the pre-flight asks for vLLM
                "--set",
                f"judge.{judge}.repair=false",
            ]
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "omnistory_core",
                "evaluate",
                "out/sweeps/bench",
                "--metrics",
                "",
                "--judges",
                ",".join(JUDGES.values()),
                *sets,
                "--no-report",
                "--no-progress",
            ],
            # the hosted judges read their key from OPENAI_API_KEY; the local server checks none
            cwd=root,
            capture_output=True,
            text=True,
            env={**_env(), "OPENAI_API_KEY": "local"},
        )
    if proc.returncode != 0:
        sys.exit(f"evaluate failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    scores = (root / "out" / "sweeps" / "bench" / "scores.jsonl").read_text().splitlines()
    bad = [row for row in map(json.loads, scores) if row["status"] != "ok"]
    if bad:
        sys.exit(f"{len(bad)} judge rows are not ok, e.g. {bad[0]}")
    return json.loads((root / "out" / "sweeps" / "bench" / "evaluation_stats.json").read_text())


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
        judged = evaluate_sweep(root)
        judged_again = evaluate_sweep(root)
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
    print()
    print(f"evaluation: one judge per track, {systems} systems x {n} examples")
    print(f"{'judge':<28}{'distinct/example':>18}{'naive/example':>16}{'ratio':>8}")
    total_j = 0.0
    for track, judge in JUDGES.items():
        key = f"judge/{judge}"
        d = judged["components"][key]["calls"] / n
        total_j += d
        print(f"{track + ' (' + judge + ')':<28}{d:>18.2f}{systems:>16d}{d / systems:>8.2f}")
    naive_j = systems * len(JUDGES)
    print(f"{'total':<28}{total_j:>18.2f}{naive_j:>16d}{total_j / naive_j:>8.2f}")
    again = sum(c["calls"] for c in judged_again["components"].values())
    print(f"cached re-evaluation: {again} judge calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
