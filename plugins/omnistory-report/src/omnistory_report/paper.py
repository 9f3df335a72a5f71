"""The paper's numbered tables and figures under their paper names, and their index.

Writes ``tables/tableNN_<slug>.csv`` / ``.md`` for every table computable from the inputs,
``figures/figureNN_<slug>.png`` / ``.svg`` for every figure, ``tables/index.md`` (and ``.csv``)
and ``paper_tables.json`` (paper number -> file, or why it is absent).  The report's older file
names (``bootstrap_totals.csv``, ``fig3_total_ranking.png``, ...) stay as they are.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from omnistory_report.analysis.human import HumanStudy
from omnistory_report.analysis.paper_tables import (
    FIGURE_ITEMS,
    FIGURE_REASONS,
    FIGURE_STEMS,
    TABLE_ITEMS,
    PaperItem,
    compute_paper_tables,
)
from omnistory_report.analysis.statistics import StatTable
from omnistory_report.tables import markdown_table, write_table

INDEX_JSON = "paper_tables.json"


@dataclass(frozen=True)
class PaperOutputs:
    """What was written: (title, stem) of the tables for the HTML links, (title, png) figures."""

    tables: list[tuple[str, str]]
    figures: list[tuple[str, Path]]
    index: dict[str, dict[str, str]]


def write_paper_outputs(
    out_dir: Path,
    frame: pd.DataFrame,
    cube,
    lb: pd.DataFrame,
    stats: Mapping[str, StatTable],
    info: pd.DataFrame,
    paradigms: Mapping[str, str] | None = None,
    lengths: pd.DataFrame | None = None,
    exclude: Collection[str] = (),
    incomplete: str = "",
    human: HumanStudy | None = None,
) -> PaperOutputs:
    """Compute and write every paper table and figure, then the index.  ``incomplete`` is the
    note on evaluator errors added to every table that does not carry it yet."""
    from omnistory_report import figures as fig

    tables_dir, fig_dir = out_dir / "tables", out_dir / "figures"
    computed, extra = compute_paper_tables(
        frame, cube, lb, stats, paradigms=paradigms, lengths=lengths, exclude=exclude, human=human
    )
    index: dict[str, dict[str, str]] = {}
    links: list[tuple[str, str]] = []
    for item in TABLE_ITEMS:
        value = computed.get(item.number, "not computed")
        if isinstance(value, str):
            index[item.label] = _entry(item, absent=value)
            continue
        table = _with_note(value, incomplete)
        title = f"{item.label}: {table.title}"
        write_table(table.frame, tables_dir, item.stem, title, table.note)
        links.append((title, item.stem))
        index[item.label] = _entry(item, file=f"tables/{item.stem}.csv")
    for stem, table in extra.items():
        table = _with_note(table, incomplete)
        write_table(table.frame, tables_dir, stem, table.title, table.note)
        links.append((table.title, stem))

    figures: list[tuple[str, Path]] = []
    for item in FIGURE_ITEMS:
        png = _paper_figure(item, fig, fig_dir, lb, info, computed, extra, stats, exclude)
        if png is None:
            reason = FIGURE_REASONS.get(item.number) or _figure_reason(item, computed)
            index[item.label] = _entry(item, absent=reason)
            continue
        index[item.label] = _entry(item, file=f"figures/{png.name}")
        if item.number not in FIGURE_STEMS:  # the older figures are already in the report
            figures.append((f"{item.label}: {item.caption}", png))

    (out_dir / INDEX_JSON).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    _write_index_md(tables_dir / "index.md", index)
    return PaperOutputs(links, figures, index)


def _entry(item: PaperItem, file: str | None = None, absent: str | None = None) -> dict[str, str]:
    out = {"title": item.caption, "section": item.section}
    if file is not None:
        out["file"] = file
    else:
        out["absent"] = absent or "not computed"
    return out


def _with_note(table: StatTable, incomplete: str) -> StatTable:
    if not incomplete or incomplete in table.note:
        return table
    note = f"{table.note}\n\n{incomplete}" if table.note else incomplete
    return StatTable(table.title, table.frame, note)


def _paper_figure(
    item, fig, fig_dir: Path, lb, info, computed, extra, stats, exclude
) -> Path | None:
    if item.number in FIGURE_STEMS:
        return _copy_figure(fig_dir, FIGURE_STEMS[item.number], item.stem)
    comparable = lb[~lb["system"].isin(list(exclude))]
    if item.number == 5:
        crit = stats.get("criterion_scores_text")
        criteria = (
            crit.frame.set_index("system").drop(index=list(exclude), errors="ignore")
            if crit is not None
            else pd.DataFrame(index=pd.Index(comparable["system"], name="system"))
        )
        return fig.text_metrics_figure(comparable, criteria, info, fig_dir)
    if item.number == 7:
        return fig.judge_distributions_figure(comparable, fig_dir)
    if item.number == 14:
        return fig.ranking_figure(lb, info, fig_dir, column="total_zero", stem=item.stem)
    if item.number == 12:
        partials = computed.get(12)
        means = extra.get("integrated_category_paradigm_means")
        if isinstance(partials, StatTable) and means is not None:
            return fig.integrated_categories_figure(means.frame, partials.frame, fig_dir)
    return None


def _figure_reason(item: PaperItem, computed) -> str:
    if item.number == 12 and isinstance(computed.get(12), str):
        return computed[12]
    return "not produced by `report` yet"


def _copy_figure(fig_dir: Path, old_stem: str, new_stem: str) -> Path | None:
    png = fig_dir / f"{old_stem}.png"
    if not png.is_file():
        return None
    for ext in ("png", "svg"):
        src = fig_dir / f"{old_stem}.{ext}"
        if src.is_file():
            shutil.copyfile(src, fig_dir / f"{new_stem}.{ext}")
    return fig_dir / f"{new_stem}.png"


def _write_index_md(path: Path, index: Mapping[str, Mapping[str, str]]) -> None:
    """``index.md`` (with links) and ``index.csv`` next to it (every table has both)."""
    rows = []
    for label, entry in index.items():
        rows.append(
            {
                "paper": label,
                "section": entry["section"],
                "content": entry["title"],
                "file": entry.get("file", ""),
                "absent because": entry.get("absent", ""),
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path.with_suffix(".csv"), index=False)
    for row in rows:
        file = row["file"]
        row["file"] = f"[{Path(file).name}](../{file})" if file else ""
    text = (
        "# The paper's tables and figures\n\n"
        "Each numbered table and figure of the paper, the file that reproduces it from the scores "
        "table, or why it is absent. Same index as `../paper_tables.json`.\n\n"
        + markdown_table(pd.DataFrame(rows))
    )
    path.write_text(text, encoding="utf-8")
