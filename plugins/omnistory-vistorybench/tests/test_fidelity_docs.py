"""The README's Fidelity table is the code's (metrics.math.FIDELITY, fidelity.OPTIONS and
fidelity.DEPARTURES), and every row names an option."""

from __future__ import annotations

from pathlib import Path

from omnistory_vistorybench.fidelity import DEPARTURES, OPTIONS, readme_tables, rows, tables
from omnistory_vistorybench.metrics.math import FIDELITY

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_fidelity_table_matches_the_code() -> None:
    held = readme_tables(README.read_text(encoding="utf-8"))
    assert held is not None, "README lacks the fidelity markers"
    assert held == tables(), "run: python -m omnistory_vistorybench.fidelity --write"


def test_every_quirk_option_and_departure_is_a_row_with_an_option() -> None:
    text = tables()
    lines = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(lines) == len(FIDELITY) + len(OPTIONS) + len(DEPARTURES) + 1  # one header row
    assert lines[0].split(" | ")[1:] == [
        "official behaviour",
        "ours by default",
        "option",
        "a published number moves |",
    ]
    for row in rows():
        assert f"| {row.metric} |" in text
        assert row.option.startswith("`") and row.moves, row  # a named option, and the effect
        assert "not reproducible" not in " ".join(row).lower()
