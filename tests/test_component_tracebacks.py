"""The full traceback of a component exception is kept, through the real CLI: in the store's record
and the job's ``records.jsonl`` always, and on stderr as the call fails under
``OMNISTORY_VERBOSE=1`` (what the CLI's ``--verbose`` sets); without it the console shows the
one-line failure summary only.  A ``load()`` that raises shows its traceback the same way."""

from __future__ import annotations

import json
from pathlib import Path

from omnistory_testkit import run_cli
from test_output_checks import line_of, write_plugin

QUIET = "engine.progress=false"
PACKAGE = "omnistory_crashy"

HOOKS = """
from omnistory_core.api import hookimpl


@hookimpl
def register_planners(register):
    from omnistory_crashy.planner import Crashy

    register(Crashy)
"""

PLANNER = """
import os

from omnistory_core.api import Planner


class Crashy(Planner):
    name = "crashy"
    version = "1"
    reads = ("current_text",)
    parameters = ()

    def load(self):
        if os.environ.get("CRASHY_LOAD"):
            open_weights("/nowhere/weights.bin")

    def run_one(self, item):
        return page_weight(item["current_text"])  # CALLER


def page_weight(text):
    return float(text.encode()[:3])  # BUG


def open_weights(path):
    raise RuntimeError(f"no weights at {path}")  # LOAD BUG
"""

JOB = Path("out/runs/demo/crashy-copy-noop")


def run(tmp_path: Path, *args: str, **env: str):
    env = {"PYTHONPATH": str(tmp_path / "site"), "PYTHONDONTWRITEBYTECODE": "1", **env}
    return run_cli(
        "planner=crashy", "tts=noop", "dataset.limit=2", "output_root=out", QUIET, *args,
        cwd=tmp_path, env=env,
    )  # fmt: skip


def install(tmp_path: Path) -> None:
    write_plugin(
        tmp_path / "site",
        {f"{PACKAGE}/__init__.py": HOOKS, f"{PACKAGE}/planner.py": PLANNER},
        dist="omnistory-crashy",
        package=PACKAGE,
    )


def _frames(traceback: str) -> list[tuple[str, int, str]]:
    """(file name, line, function) of each frame of a printed traceback."""
    out = []
    for line in traceback.splitlines():
        line = line.strip()
        if line.startswith('File "'):
            path, rest = line[len('File "') :].split('", line ', 1)
            number, _, function = rest.partition(", in ")
            out.append((Path(path).name, int(number), function))
    return out


def test_the_traceback_is_in_the_records_and_on_stderr_only_when_verbose(tmp_path: Path) -> None:
    install(tmp_path)
    quiet = run(tmp_path)
    assert quiet.returncode == 0, quiet.stderr  # the copied images are still made
    assert "Traceback" not in quiet.stdout + quiet.stderr
    lines = (tmp_path / JOB / "records.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    trace = rows[0]["text"]["traceback"]
    assert trace.startswith("Traceback (most recent call last):")
    assert trace.rstrip().endswith("ValueError: could not convert string to float: b'Len'")
    ours = [f for f in _frames(trace) if f[0] == "planner.py"]
    assert ours == [
        ("planner.py", line_of(PLANNER, "# CALLER"), "run_one"),
        ("planner.py", line_of(PLANNER, "# BUG"), "page_weight"),
    ]
    # the summary keeps pointing at the innermost frame; the store's record has the same text
    assert rows[0]["text"]["where"] == f"{PACKAGE}/planner.py:{line_of(PLANNER, '# BUG')}"
    records = [json.loads(p.read_text()) for p in (tmp_path / "out/store/calls").glob("*/*.json")]
    failed = [r for r in records if r["component"] == "planner/crashy"]
    assert len(failed) == 2 and {r["failure"]["traceback"][:35] for r in failed} == {
        "Traceback (most recent call last):\n"
    }

    # --verbose: the failed calls are recomputed (a crash is) and each traceback is on stderr
    loud = run(tmp_path, OMNISTORY_VERBOSE="1")
    assert loud.returncode == 0, loud.stderr
    assert loud.stderr.count("Traceback (most recent call last):") == 2
    heads = [line for line in loud.stderr.splitlines() if line.startswith("omnistory: planner/")]
    ids = [row["example_id"] for row in rows]
    assert [h.split(" on example ")[1].split(" (call ")[0] for h in heads] == ids
    assert all(h.startswith("omnistory: planner/crashy failed on example ") for h in heads)
    assert f'planner.py", line {line_of(PLANNER, "# BUG")}, in page_weight' in loud.stderr


def test_a_load_failure_shows_its_traceback_when_verbose(tmp_path: Path) -> None:
    install(tmp_path)
    quiet = run(tmp_path, CRASHY_LOAD="1")
    assert quiet.returncode != 0
    assert "planner=crashy cannot run: RuntimeError: no weights at /nowhere/weights.bin" in (
        quiet.stderr
    )
    assert "Traceback" not in quiet.stderr
    loud = run(tmp_path, CRASHY_LOAD="1", OMNISTORY_VERBOSE="1")
    assert loud.returncode != 0
    assert "omnistory: planner/crashy could not load:\nTraceback" in loud.stderr
    frames = [f for f in _frames(loud.stderr) if f[0] == "planner.py"]
    assert frames[-1] == ("planner.py", line_of(PLANNER, "# LOAD BUG"), "open_weights")
