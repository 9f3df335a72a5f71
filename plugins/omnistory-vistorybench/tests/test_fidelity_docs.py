"""The README's Fidelity tables are the code's (metrics.math.FIDELITY and DEPARTURES)."""

from __future__ import annotations

from pathlib import Path

from omnistory_vistorybench.fidelity import readme_tables, tables
from omnistory_vistorybench.metrics.math import DEPARTURES, FIDELITY

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_fidelity_tables_match_the_code() -> None:
    held = readme_tables(README.read_text(encoding="utf-8"))
    assert held is not None, "README lacks the fidelity markers"
    assert held == tables(), "run: python -m omnistory_vistorybench.fidelity --write"


def test_every_quirk_and_departure_is_a_row() -> None:
    text = tables()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == len(FIDELITY) + len(DEPARTURES) + 2  # two header rows
    for metric, *_ in (*FIDELITY, *DEPARTURES):
        assert f"| {metric} |" in text
