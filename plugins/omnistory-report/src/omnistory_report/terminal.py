"""The leaderboard as a rich table in the terminal."""

from __future__ import annotations

import pandas as pd

from omnistory_report.analysis.leaderboard import incomplete_columns
from omnistory_report.tables import INCOMPLETE, error_footnote, format_value

_COLUMNS = (
    ("bertscore", "BERT"),
    ("clip", "CLIP"),
    ("speech_meta", "Meta"),
    ("judge_text", "J_T"),
    ("judge_image", "J_I"),
    ("judge_speech", "J_S"),
    ("judge_omni", "J_O"),
    ("total", "Total"),
    ("total_zero", "Total(0)"),
    ("missing_text", "miss T"),
    ("missing_image", "miss I"),
    ("missing_speech", "miss S"),
)


def leaderboard_table(lb: pd.DataFrame, info: pd.DataFrame):
    """A ``rich.table.Table`` of the leaderboard; oracle systems are flagged in red."""
    from rich.table import Table

    table = Table(
        title="Omni-StoryBench leaderboard (valid-only; Total(0) = zero-filled)",
        header_style="bold",
    )
    table.add_column("#", justify="right")
    table.add_column("system")
    table.add_column("paradigm")
    for _, label in _COLUMNS:
        table.add_column(label, justify="right")
    for rank, row in enumerate(lb.itertuples(index=False), 1):
        system = row.system
        oracle = bool(system in info.index and info.loc[system, "oracle"])
        paradigm = str(info.loc[system, "paradigm"]) if system in info.index else "unknown"
        name = f"[bold red]{system} (ORACLE)[/]" if oracle else system
        marks = incomplete_columns(row)
        cells = [
            format_value(
                getattr(row, col), 3 if col.startswith("judge") else 4, col.startswith("missing")
            )
            + (f" [yellow]{INCOMPLETE}[/]" if col in marks else "")
            for col, _ in _COLUMNS
        ]
        table.add_row(str(rank), name, paradigm, *cells)
    footnote = error_footnote(lb)
    if footnote:
        table.caption = footnote.replace("`", "'")
    return table


def print_leaderboard(lb: pd.DataFrame, info: pd.DataFrame, console=None) -> None:
    """Print the leaderboard table (to ``console`` or a fresh stdout console)."""
    from rich.console import Console

    if console is None:
        console = Console()
        if not console.is_terminal:
            # Logs and CI: do not squeeze 15 columns into the 80-column default.
            console = Console(width=200)
    console.print(leaderboard_table(lb, info))


def stand_in_table(table: pd.DataFrame, columns, info: pd.DataFrame):
    """A ``rich.table.Table`` of the stand-in leaderboard (see
    :mod:`omnistory_report.analysis.stand_in`): each header names its evaluator, criterion and
    backend (the backends in the caption); a cell is the valid-only mean with the zero-filled
    one after it."""
    from rich.table import Table

    from omnistory_report.analysis.stand_in import NOT_SCORED, TITLE

    out = Table(title=f"{TITLE}; valid-only (zero-filled)", header_style="bold")
    out.add_column("#", justify="right")
    out.add_column("system")
    out.add_column("N", justify="right")
    for col in columns:
        # the header stays narrow; the backend, which must be read whole, is in the caption
        out.add_column(f"{col.evaluator}/{col.criterion}", justify="right", overflow="fold")
    out.caption = "; ".join(f"{c.evaluator}/{c.criterion}: {c.backend}" for c in columns)
    out.caption_justify = "left"
    for rank, row in enumerate(table.to_dict("records"), 1):
        system = str(row["system"])
        oracle = bool(system in info.index and info.loc[system, "oracle"])
        cells = [
            f"{format_value(row[c.label], 4)} ({format_value(row[c.label + ' (0)'], 4)})"
            if c.scored
            else f"[dim]{NOT_SCORED}[/]"
            for c in columns
        ]
        name = f"[bold red]{system} (ORACLE)[/]" if oracle else system
        out.add_row(str(rank), name, str(row["n_examples"]), *cells)
    return out


def print_stand_in(table: pd.DataFrame, columns, info: pd.DataFrame, console=None) -> None:
    """Print the stand-in leaderboard (nothing when no stand-in metric scored the run)."""
    from rich.console import Console

    if table.empty:
        return
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=200)
    console.print(stand_in_table(table, columns, info))


def print_no_paper_scores(line: str, console=None) -> None:
    """The one line printed instead of a paper leaderboard of dashes."""
    from rich.console import Console
    from rich.markup import escape

    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=200)
    console.print(f"[dim]{escape(line)}[/]")
