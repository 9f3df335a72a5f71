"""The index of the paper's numbered tables and figures, and the copies under their paper names.

The registry (:mod:`omnistory_report.registry`) writes ``tables/tableNN_<slug>.csv`` / ``.md`` for
every table computable from the inputs and ``figures/figureNN_<slug>.png`` / ``.svg`` for every
figure; :func:`paper_index` lists each of them with its file or why it is absent, and
:func:`write_index` writes that list as ``paper_tables.json`` and ``tables/index.md`` (and
``.csv``).  The report's older file names (``bootstrap_totals.csv``, ``fig3_total_ranking.png``,
...) stay as they are.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

import pandas as pd

from omnistory_report.analysis.paper_tables import PaperItem
from omnistory_report.tables import markdown_table

INDEX_JSON = "paper_tables.json"


class _Table(Protocol):
    @property
    def paper(self) -> PaperItem | None: ...


class _Written(Protocol):
    """What :func:`paper_index` reads of the registry's ``Written`` (named by its shape: the
    registry imports this module, so this one does not import the registry, not even for types)."""

    @property
    def table(self) -> _Table: ...
    @property
    def file(self) -> str | None: ...
    @property
    def absent(self) -> str | None: ...


def paper_index(written: Iterable[_Written]) -> dict[str, dict[str, str]]:
    """Paper label -> title, section and file (or why it is absent), in the registry's order."""
    return {
        w.table.paper.label: _entry(w.table.paper, w.file, w.absent)
        for w in written
        if w.table.paper is not None
    }


def _entry(item: PaperItem, file: str | None = None, absent: str | None = None) -> dict[str, str]:
    out = {"title": item.caption, "section": item.section}
    if file is not None:
        out["file"] = file
    else:
        out["absent"] = absent or "not computed"
    return out


def write_index(out_dir: Path, index: Mapping[str, Mapping[str, str]]) -> None:
    """``paper_tables.json`` and ``tables/index.md`` (with links) and ``tables/index.csv``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / INDEX_JSON).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    path = out_dir / "tables" / "index.md"
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


def copy_figure(fig_dir: Path, old_stem: str, new_stem: str) -> Path | None:
    """Copy ``old_stem``'s PNG and SVG to ``new_stem``; None when the PNG was not written."""
    png = fig_dir / f"{old_stem}.png"
    if not png.is_file():
        return None
    for ext in ("png", "svg"):
        src = fig_dir / f"{old_stem}.{ext}"
        if src.is_file():
            shutil.copyfile(src, fig_dir / f"{new_stem}.{ext}")
    return fig_dir / f"{new_stem}.png"
