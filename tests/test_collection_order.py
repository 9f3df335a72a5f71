"""The repository's conftest.py puts the tests marked slow first, the longest first, so that
the test command's workers end together (scripts/test.sh)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_slow_tests_are_collected_first_and_the_longest_first() -> None:
    files = [
        "tests/test_plan.py",  # no slow test, collected first by path
        "tests/test_wheel.py",  # slow(seconds=25)
        "plugins/omnistory-demo-real/tests/test_demo_real_sanity.py",  # slow(seconds=240)
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert ids[0].endswith("test_demo_real_sanity.py::test_demo_real_sanity"), ids[:3]
    assert ids[1].endswith("test_wheel.py::test_non_editable_wheel_runs_the_demo"), ids[:3]
    rest = ids[2:]
    # the others keep pytest's order: files as given, tests as written
    assert [i.split("::")[0] for i in rest] == sorted(
        (i.split("::")[0] for i in rest), key=files.index
    )
    assert any(i.startswith("tests/test_plan.py::") for i in rest)
