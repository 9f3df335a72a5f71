"""``human export`` on a run smaller than the paper's window of 10: it uses every common transition
with one warning line (exit 0), and the export imports back as usual."""

from __future__ import annotations

import json

from human_helpers import SYSTEMS, Study, synthetic_export
from omnistory_report.human.export import DEFAULT_WINDOW, window_size
from omnistory_testkit import run_cli


def test_a_run_with_fewer_common_transitions_than_the_window_uses_them_all(study: Study) -> None:
    assert len(study.examples) < DEFAULT_WINDOW  # 3 transitions common to every system
    out = study.root / "ls"
    proc = run_cli("human", "export", str(study.run_dir), "--out", str(out), cwd=study.root)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1, proc.stderr
    assert warnings[0].startswith("omnistory: warning: "), warnings
    assert "only 3 transition(s) are common to every system" in warnings[0]
    assert f"instead of a window of {DEFAULT_WINDOW}" in warnings[0]

    plan = json.loads((out / "plan.json").read_text())
    assert plan["window"] == study.examples
    assert len(plan["items"]) == len(SYSTEMS) * 3 * 4  # systems x transitions x tracks
    assert "4 systems x 3 transitions" in proc.stdout

    # the smaller study round-trips like any other
    export = out / "export.json"
    export.write_text(json.dumps(synthetic_export(out)))
    back = run_cli(
        "human", "import", str(export), "--scores", str(study.scores), "--plan",
        str(out / "plan.json"), cwd=study.root,
    )  # fmt: skip
    assert back.returncode == 0, back.stderr


def test_the_paper_window_typed_out_shrinks_too_and_a_start_still_applies(study: Study) -> None:
    out = study.root / "ls"
    proc = run_cli(
        "human", "export", str(study.run_dir), "--out", str(out), "--window",
        str(DEFAULT_WINDOW), "--start", "0", cwd=study.root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("omnistory: warning: ") == 1, proc.stderr
    assert json.loads((out / "plan.json").read_text())["window"] == study.examples


def test_only_the_default_window_shrinks() -> None:
    assert window_size(DEFAULT_WINDOW, 3)[0] == 3
    assert window_size(DEFAULT_WINDOW, 12) == (DEFAULT_WINDOW, None)
    assert window_size(4, 3) == (4, None)  # asked for explicitly: sample_plan refuses it
    assert window_size(DEFAULT_WINDOW, 0) == (DEFAULT_WINDOW, None)
