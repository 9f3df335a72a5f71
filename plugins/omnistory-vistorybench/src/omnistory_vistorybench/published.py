"""The published ViStoryBench leaderboard, shipped as data (``published/``; its README names the
source): every published method and mode on full and lite, as run tables the official
leaderboard ranks (:mod:`omnistory_vistorybench.leaderboard`), so that the report ranks a user's
systems among them ("where would my method land").

A table is the website's per-metric table: ``Method`` (the group label), ``model`` (the method),
``mode``, then one column per metric under the website's name (:data:`WEBSITE_COLUMNS`).  Each
row is already a (method, mode) mean, so it enters the run table as one run with an empty
language and timestamp; ``Prompt Align Avg`` is derived, and recomputed by the leaderboard.
"""

from __future__ import annotations

import csv
import math
from importlib.resources import files
from pathlib import Path

import pandas as pd

from omnistory_vistorybench import leaderboard as lb

#: the website's column -> the metric key (``leaderboard.SHOWN_METRICS``)
WEBSITE_COLUMNS: dict[str, str] = {
    "Cross CSD Score (Ref-Gen)": "cross_csd",
    "Self CSD Score (Gen-Gen)": "self_csd",
    "Cross Cref Score (Ref-Gen)": "cids_cross_mean",
    "Self Cref Score (Gen-Gen)": "cids_self_mean",
    "Aesthetics Score": "aesthetic_score",
    "Inception Score": "inception_score",
    "OCCM": "occm",
    "Scene": "scene",
    "Camera": "camera",
    "Global Character Action": "character_action",
    "Local/Single Character Action": "single_character_action",
}
#: derived on the website; the leaderboard recomputes it (``leaderboard.prompt_align_avg``)
DERIVED_COLUMNS: tuple[str, ...] = ("Prompt Align Avg",)
FRONT: tuple[str, ...] = ("Method", "model", "mode")
SPLITS: tuple[str, ...] = ("full", "lite")
#: where the report and leaderboard say a row comes from
SOURCE = "published"


def table_path(split: str) -> Path:
    """The shipped table of ``split`` (``full`` or ``lite``)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    return Path(
        str(files("omnistory_vistorybench") / "published" / f"vistorybench_detail_{split}.csv")
    )


def read_detail_csv(path: str | Path, split: str) -> pd.DataFrame:
    """One website table as a run table (``leaderboard`` module docstring): ``split``,
    ``method`` = ``model``, ``mode``, an empty ``language`` and ``timestamp``, then the metric
    keys.  A malformed file raises ValueError naming the file, row and column."""
    path = Path(path)
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in reader.fieldnames or []]
        missing = [c for c in (*FRONT, *WEBSITE_COLUMNS) if c not in header]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}; the header is {header}")
        unknown = [c for c in header if c not in (*FRONT, *WEBSITE_COLUMNS, *DERIVED_COLUMNS)]
        if unknown:
            raise ValueError(f"{path}: unknown column(s) {unknown}")
        records = []
        for row, cells in enumerate(reader, 1):
            record: dict[str, object] = {
                "split": split,
                "method": _text(path, row, cells, "model"),
                "mode": _text(path, row, cells, "mode"),
                "language": "",
                "timestamp": "",
            }
            for column, key in WEBSITE_COLUMNS.items():
                record[key] = _number(path, row, column, cells.get(column))
            records.append(record)
    return pd.DataFrame(records, columns=[*lb.KEY_COLUMNS, *WEBSITE_COLUMNS.values()])


def _text(path: Path, row: int, cells: dict[str, str | None], column: str) -> str:
    value = (cells.get(column) or "").strip()
    if not value:
        raise ValueError(f"{path}: row {row}, column {column!r} is empty")
    return value


def _number(path: Path, row: int, column: str, text: str | None) -> float:
    text = (text or "").strip()
    if not text:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"{path}: row {row}, column {column!r}: {text!r} is not a number"
        ) from None
    return value if math.isfinite(value) else math.nan


def published_runs(splits: tuple[str, ...] = SPLITS) -> pd.DataFrame:
    """The shipped tables of ``splits`` as one run table."""
    return pd.concat([read_detail_csv(table_path(s), s) for s in splits], ignore_index=True)


__all__ = [
    "DERIVED_COLUMNS",
    "SOURCE",
    "SPLITS",
    "WEBSITE_COLUMNS",
    "published_runs",
    "read_detail_csv",
    "table_path",
]
