"""CSV (full precision) and Markdown (rounded, human-readable) table writers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from omnistory_report.analysis.leaderboard import (
    COMPONENTS,
    LEADERBOARD_COLUMNS,
    incomplete_columns,
)

MISSING = "—"
INCOMPLETE = "†"
ERROR_COLUMNS = tuple(f"errors_{c}" for c in COMPONENTS)


def error_footnote(lb: pd.DataFrame) -> str:
    """The footnote for cells marked † (empty when every cell is complete)."""
    if lb.empty or not any(c in lb for c in ERROR_COLUMNS):
        return ""
    total = int(lb[[c for c in ERROR_COLUMNS if c in lb]].to_numpy().sum())
    if not total:
        return ""
    return (
        f"{INCOMPLETE} incomplete: computed without the examples whose evaluator could not answer "
        "(status `error`: server down, weights missing, ...); they count neither as valid nor as "
        "zero. `errors_*` give the number per component. Rerun `evaluate` once the cause is fixed."
    )


def format_value(value: object, digits: int = 4, trim_integers: bool = True) -> str:
    """Human-readable cell: floats rounded, NaN/None as an em dash, bools as yes/no.

    With ``trim_integers`` a float holding a whole number (a count) prints without decimals.
    """
    if value is None:
        return MISSING
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        v = float(value)
        if math.isnan(v):
            return MISSING
        if trim_integers and v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        if v != 0 and abs(v) < 10 ** (-digits):
            return f"{v:.{max(digits - 1, 1)}e}"
        return f"{v:.{digits}f}"
    return str(value)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(
    frame: pd.DataFrame, digits: int = 4, integer_columns: set[str] | None = None
) -> str:
    """A GitHub-flavoured Markdown table of the frame (index not included).

    ``integer_columns``: when given, only these columns print whole floats without decimals.
    """
    cols = [str(c) for c in frame.columns]
    trim = [integer_columns is None or c in integer_columns for c in cols]
    lines = [
        "| " + " | ".join(_md_cell(c) for c in cols) + " |",
        "| " + " | ".join("---" for _ in cols) + " |",
    ]
    for row in frame.itertuples(index=False, name=None):
        cells = (_md_cell(format_value(v, digits, t)) for v, t in zip(row, trim, strict=True))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_table(
    frame: pd.DataFrame, directory: Path, stem: str, title: str, note: str = ""
) -> tuple[Path, Path]:
    """Write ``stem.csv`` (full precision) and ``stem.md`` (title, note, rounded table)."""
    directory.mkdir(parents=True, exist_ok=True)
    csv_path = directory / f"{stem}.csv"
    md_path = directory / f"{stem}.md"
    frame.to_csv(csv_path, index=False)
    body = markdown_table(frame) if len(frame.columns) else "_(no data)_\n"
    text = f"# {title}\n\n" + (f"{note}\n\n" if note else "") + body
    md_path.write_text(text, encoding="utf-8")
    return csv_path, md_path


def write_leaderboard(lb: pd.DataFrame, info: pd.DataFrame, directory: Path) -> tuple[Path, Path]:
    """``leaderboard.csv`` with exactly LEADERBOARD_COLUMNS, and ``leaderboard.md``.

    The Markdown view adds rank, paradigm and an oracle marker, and marks with † (and a footnote)
    every number computed without examples whose evaluator could not answer; the CSV columns are a
    contract and stay numeric (its ``errors_*`` columns carry the same information).
    """
    directory.mkdir(parents=True, exist_ok=True)
    csv_path = directory / "leaderboard.csv"
    lb.loc[:, list(LEADERBOARD_COLUMNS)].to_csv(csv_path, index=False)

    view = pd.DataFrame({"rank": np.arange(1, len(lb) + 1)})
    view["system"] = [f"{s} ⚠ ORACLE" if _is_oracle(info, s) else s for s in lb["system"]]
    view["paradigm"] = [_paradigm(info, s) for s in lb["system"]]
    footnote = error_footnote(lb)
    marks = [incomplete_columns(row) for _, row in lb.iterrows()]
    for col in LEADERBOARD_COLUMNS[1:]:
        if col in ERROR_COLUMNS and not footnote:
            continue  # all zero: the columns would only be noise
        values = lb[col].to_numpy()
        if any(col in m for m in marks):  # a number computed without some examples: say so
            values = [
                f"{format_value(v)} {INCOMPLETE}" if col in m else v
                for v, m in zip(values, marks, strict=True)
            ]
        view[col] = values
    counts = {"rank", "n_examples", *(c for c in view if "missing" in c or c in ERROR_COLUMNS)}
    md = [
        "# Omni-StoryBench leaderboard\n",
        "Valid-only scores (Appendix E.5) first, then zero-filled (`_zero`, Appendix F.4). "
        "Metrics on their native 0–1 scale, judges on 1–10; Total Average = (10·BERT + 10·CLIP + "
        "10·Meta + J_text + J_image + J_speech + J_omni) / 7. `missing_*` count examples whose "
        "output is missing. Systems marked ⚠ ORACLE read the reference and are not comparable.\n",
        markdown_table(view, integer_columns=counts),
    ]
    if footnote:
        md.append(footnote + "\n")
    md_path = directory / "leaderboard.md"
    md_path.write_text("\n".join(md), encoding="utf-8")
    return csv_path, md_path


def _is_oracle(info: pd.DataFrame, system: str) -> bool:
    return bool(system in info.index and info.loc[system, "oracle"])


def _paradigm(info: pd.DataFrame, system: str) -> str:
    return str(info.loc[system, "paradigm"]) if system in info.index else "unknown"
