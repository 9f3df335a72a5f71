"""The README's "Fidelity" tables, written from :data:`.metrics.math.FIDELITY` and
:data:`.metrics.math.DEPARTURES`, so the documentation cannot drift from the code.

    python -m omnistory_vistorybench.fidelity            # print the tables
    python -m omnistory_vistorybench.fidelity --write    # rewrite them in the plugin's README

The README holds them between the markers :data:`START` and :data:`END`; a test compares them.
"""

from __future__ import annotations

import sys
from pathlib import Path

START = "<!-- fidelity tables: written by python -m omnistory_vistorybench.fidelity --write -->"
END = "<!-- end of fidelity tables -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def tables() -> str:
    """Both tables as markdown: the official quirks ``faithful`` switches, then the ports that
    cannot be exact."""
    from omnistory_vistorybench.metrics.math import DEPARTURES, FIDELITY

    lines = [
        "Official quirks: `faithful=true` (the default of every metric) reproduces them;"
        " `faithful=false` gives the alternative.",
        "",
        "| metric | the official code | `faithful=true` | `faithful=false` |",
        "| --- | --- | --- | --- |",
        *(f"| {' | '.join(_cell(c) for c in row)} |" for row in FIDELITY),
        "",
        "Ports that cannot be exact here (no switch):",
        "",
        "| metric | the official code runs | here | why |",
        "| --- | --- | --- | --- |",
        *(f"| {' | '.join(_cell(c) for c in row)} |" for row in DEPARTURES),
    ]
    return "\n".join(lines)


def readme_path() -> Path:
    return Path(__file__).resolve().parents[2] / "README.md"


def readme_tables(text: str) -> str | None:
    """What the README holds between the markers, or None when they are missing."""
    if START not in text or END not in text:
        return None
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n")


def write(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    if readme_tables(text) is None:
        raise SystemExit(f"{path}: the markers {START!r} and {END!r} are missing")
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(f"{head}{START}\n{tables()}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write(readme_path())
    else:
        print(tables())
