#!/usr/bin/env python3
"""Write ``tests/data/store_reuse_07ff5fc.json``: the store keys and output bytes of two sweeps as
the code *before* the package split made them, so ``tests/test_store_reuse.py`` can hold the
current code to them without the old code at hand.

The golden file in the repository was written by this script run with the code of commit 07ff5fc
(the last commit before omnistory_core was split into omnistory-eval, omnistory-report and
omnistory-testkit), in a virtualenv of that commit::

    git clone -q /work/main /tmp/old && git -C /tmp/old checkout -q 07ff5fc
    python3 -m venv /tmp/old/.venv && /tmp/old/.venv/bin/pip install -q --upgrade pip
    /tmp/old/.venv/bin/pip install -q "torch==2.13.0"
    /tmp/old/.venv/bin/pip install -q -e "/tmp/old[test,metrics,judges]" /tmp/old/plugins/*/
    cd /tmp && /tmp/old/.venv/bin/python /work/main/tools/make_store_reuse_golden.py \\
        /work/main/tests/data/store_reuse_07ff5fc.json

The script itself runs under either layout (it finds the stand-ins where each keeps them), so
running it with the current code and diffing the result against the golden file is a quick way
to see what changed.  Keys and bytes depend on some third-party libraries too, by design (the
``espeakng-loader`` version is part of ``tts/espeak``'s key; Pillow, numpy and soundfile encode
the images and tones), so their versions are recorded: after upgrading one of them, regenerate
the golden file with the old commit's code in an environment with the new versions.

Each run is a real sweep through ``python -m omnistory_core`` in a fresh temporary directory:

* ``demo_grid``: ``-m planner=template,copy image=copy,noop tts=espeak,noop`` (built-in
  components, the 10 demo examples);
* ``paper32``: ``-m suite=paper32 dataset.limit=2`` with every model component replaced by its
  stand-in (``make_standin_site``), as ``tests/test_paper_suites.py`` runs it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

#: name -> (sweep arguments, whether model components are replaced by stand-ins)
RUNS: dict[str, tuple[tuple[str, ...], bool]] = {
    "demo_grid": (("-m", "planner=template,copy", "image=copy,noop", "tts=espeak,noop"), False),
    "paper32": (("-m", "suite=paper32", "dataset.limit=2"), True),
}
# the HTML report reads the store but never writes a call, so skipping it changes no key
COMMON = ("engine.progress=false", "evaluation.report=false", "output_root=out")
SWEEP = Path("out") / "sweeps" / "demo"
# what a job writes from its calls' results; manifest.json, stats.json and the log hold versions,
# paths, times and hit counts, which legitimately differ between the two codes
JOB_OUTPUT_DIRS = ("text", "image", "speech")
JOB_OUTPUT_FILES = ("plans.jsonl", "records.jsonl", "missing.txt")
#: distributions whose version changes keys or output bytes (see the module docstring)
ENVIRONMENT = ("espeakng-loader", "numpy", "pillow", "soundfile")


def make_standin_site(directory: Path) -> Path:
    try:
        from omnistory_testkit.standins import make_standin_site as make
    except ImportError:  # before the split the stand-ins lived in the core package
        from omnistory_core.testing.standins import (  # type: ignore[no-redef]
            make_standin_site as make,
        )
    try:  # stand-ins that declare no parameters, as 07ff5fc's did
        return make(directory, declarations=False)  # type: ignore[call-arg]
    except TypeError:
        return make(directory)


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def job_outputs(job: Path) -> dict[str, str]:
    """sha256 of each output file of one job directory, by path relative to it."""
    out = {}
    for path in sorted(job.rglob("*")):
        rel = path.relative_to(job)
        if path.is_file() and (
            rel.parts[0] in JOB_OUTPUT_DIRS or rel.as_posix() in JOB_OUTPUT_FILES
        ):
            out[rel.as_posix()] = sha256_file(path)
    return out


def collect(root: Path) -> dict[str, Any]:
    """The store's call keys (a record is ``store/calls/<key[:2]>/<key>.json``), how many belong
    to each component, and every job's output digests; ``root`` is the run's cwd."""
    calls = sorted((root / "out" / "store" / "calls").glob("*/*.json"))
    components = Counter(json.loads(p.read_text(encoding="utf-8"))["component"] for p in calls)
    sweep = root / SWEEP
    return {
        "calls": [p.stem for p in calls],
        "components": dict(sorted(components.items())),
        "outputs": {
            job.parent.name: job_outputs(job.parent)
            for job in sorted(sweep.glob("*/manifest.json"))
        },
    }


def environment() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ENVIRONMENT}


def code_revision() -> str:
    import omnistory_core

    proc = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=Path(omnistory_core.__file__).parent,
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def run(name: str, workdir: Path) -> dict[str, Any]:
    args, standins = RUNS[name]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if standins:
        site = make_standin_site(workdir / "standins")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    cwd = workdir / "run"
    cwd.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "omnistory_core", *args, *COMMON],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
    return {"args": list(args), "stand_ins": standins, **collect(cwd)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="the JSON file to write")
    ns = parser.parse_args(argv)
    golden: dict[str, Any] = {
        "about": (
            "written by tools/make_store_reuse_golden.py; checked by tests/test_store_reuse.py"
        ),
        "revision": code_revision(),
        "environment": environment(),
        "runs": {},
    }
    for name in RUNS:
        with tempfile.TemporaryDirectory(prefix=f"store-reuse-{name}-") as tmp:
            golden["runs"][name] = run(name, Path(tmp))
    ns.output.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for name, data in golden["runs"].items():
        jobs = data["outputs"]
        files = sum(len(v) for v in jobs.values())
        print(f"{name}: {len(data['calls'])} calls, {len(jobs)} jobs, {files} output files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
