"""The official ``bench_results_<split>.csv`` read as a run table (the input of
:func:`omnistory_vistorybench.leaderboard.official_leaderboard`): its columns renamed, each value
parsed, a bad cell one error naming the file, row and column (the run table's shape:
:mod:`omnistory_vistorybench.leaderboard`).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from omnistory_vistorybench.leaderboard import DEFAULT_SPLIT, KEY_COLUMNS

_CSV_FRONT = ("method", "model", "mode", "timestamp")
_CSV_METRIC = re.compile(r"^metrics\.([^.]+)\.metrics\.(.+)$")


def _csv_error(path: Path, message: str) -> ValueError:
    return ValueError(f"{path}: {message}")


def _short_names(path: Path, header: Sequence[str]) -> dict[str, str]:
    """Official metric column -> short key, for the ``metrics.<ev>.metrics.<key>`` columns."""
    names: dict[str, str] = {}
    for col in header:
        match = _CSV_METRIC.match(col)
        if match is None:
            continue
        short = match.group(2)
        clash = next((c for c, s in names.items() if s == short), None)
        if clash is not None:
            raise _csv_error(path, f"columns {clash!r} and {col!r} both map to metric {short!r}")
        names[col] = short
    return names


def _parse_metric(path: Path, row: int, line: int, column: str, text: str) -> float:
    text = text.strip()
    if text == "" or text.lower() == "nan":
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise _csv_error(
            path, f"row {row} (line {line}), column {column!r}: {text!r} is not a number"
        ) from None
    # the official reads +-inf as "no value"
    return value if math.isfinite(value) else math.nan


def _split_from_name(path: Path) -> str:
    stem = path.stem.lower()
    for split in ("lite", "full"):
        if stem.endswith(f"_{split}"):
            return split
    return DEFAULT_SPLIT


def _header(path: Path, reader: Iterable[list[str]]) -> list[str]:
    header = next(iter(reader), None)
    if not header:
        raise _csv_error(path, "no header row")
    header = [h.strip() for h in header]
    duplicates = sorted({h for h in header if header.count(h) > 1})
    if duplicates:
        raise _csv_error(path, f"duplicate column(s) {duplicates}")
    missing = [c for c in _CSV_FRONT if c not in header]
    if missing:
        raise _csv_error(path, f"missing column(s) {missing}; the header is {header}")
    return header


def read_bench_results_csv(path: str | Path, split: str | None = None) -> pd.DataFrame:
    """Read an official ``bench_results*.csv`` (``utils/export_bench_results_csv.py``'s output:
    ``method, model, mode, timestamp`` then ``metrics.<evaluator>.metrics.<key>`` columns, UTF-8
    with or without BOM) as a run table (module docstring): ``model`` -> ``mode``, ``mode`` ->
    ``language``, each metric column -> its ``<key>``.  Other columns (the flattened ``run.*``,
    ``metrics.<ev>.metric.*``, ``scope.*`` of the all-runs export) are dropped.

    ``split`` labels the rows; by default ``lite``/``full`` from a name ending in ``_lite`` or
    ``_full``, else ``all``.  A malformed file raises ValueError naming the file, and the row (1 =
    the first data row), line and column where it applies: no header, a missing front column,
    duplicate columns, a row with too many or too few cells, an empty method or mode, a metric cell
    that is not a number (empty and ``nan`` are missing values).
    """
    path = Path(path)
    split = _split_from_name(path) if split is None else split
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        header = _header(path, reader)
        names = _short_names(path, header)
        records: list[dict[str, object]] = []
        for row, cells in enumerate(reader, 1):
            if not cells:
                continue
            line = reader.line_num
            if len(cells) != len(header):
                counts = f"{len(cells)} cells, the header {len(header)}"
                raise _csv_error(path, f"row {row} (line {line}) has {counts}")
            cell = dict(zip(header, cells, strict=True))
            for col in ("method", "model"):
                if not cell[col].strip():
                    raise _csv_error(path, f"row {row} (line {line}), column {col!r} is empty")
            record: dict[str, object] = {
                "split": split,
                "method": cell["method"].strip(),
                "mode": cell["model"].strip(),
                "language": cell["mode"].strip(),
                "timestamp": cell["timestamp"].strip(),
            }
            for col, short in names.items():
                record[short] = _parse_metric(path, row, line, col, cell[col])
            records.append(record)
    return pd.DataFrame(records, columns=[*KEY_COLUMNS, *names.values()])
