"""A report with nothing to correlate (no judges, a handful of systems) does not import
``scipy.stats``: about 0.4 s of every ``evaluate`` and ``report`` command, the test suite's
hundreds among them.  The correlations themselves are checked in tests/analysis."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from omnistory_testkit import run_cli

EVALUATE_AND_TELL = """
import sys
from omnistory_core.__main__ import main
code = main(["evaluate", sys.argv[1], "--metrics", "", "--judges", ""])
print("scipy.stats imported:", "scipy.stats" in sys.modules)
sys.exit(code)
"""


def test_a_report_without_judges_does_not_import_scipy_stats(tmp_path: Path) -> None:
    made = run_cli("planner=copy", "image=copy", "dataset.limit=2", "output_root=out", cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-2000:]
    run = tmp_path / "out" / "runs" / "demo" / "copy-copy-espeak"
    proc = subprocess.run(
        [sys.executable, "-c", EVALUATE_AND_TELL, str(run)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (run / "report" / "index.html").is_file()
    assert "scipy.stats imported: False" in proc.stdout
