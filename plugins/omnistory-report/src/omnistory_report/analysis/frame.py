"""Load the long scores table into a validated pandas DataFrame.

The contract lives in :mod:`omnistory_core.scores`.  A full paper sweep is about
1.5 million rows, so the fast path parses with ``pyarrow.json`` and validates the columns in bulk;
whenever anything is wrong the file is re-read line by line through ``read_scores`` so the error
names the file, the line (the record) and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from omnistory_core.builtin.omnistorybench import OMNISTORYBENCH
from omnistory_core.scores import (
    COLUMNS,
    KINDS,
    STATUSES,
    ScoreRow,
    read_scores,
)

#: the tracks of the task this frame's tables are built for
TRACKS = OMNISTORYBENCH.track_names

KEY_COLUMNS = ("system", "example_id", "kind", "track", "evaluator", "criterion")
_STRING_COLUMNS = ("system", "example_id", "kind", "track", "evaluator", "criterion", "status")


def frame_from_rows(rows: Iterable[ScoreRow]) -> pd.DataFrame:
    """A scores DataFrame (the columns of ``COLUMNS``) from in-memory rows."""
    records = [r.to_dict() for r in rows]
    frame = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    return _normalise(frame)


def load_scores_frame(path: str | Path) -> pd.DataFrame:
    """Read ``scores.jsonl`` (or a ``.parquet`` copy) into a DataFrame with categorical key
    columns and float scores.

    Raises ``ValueError`` naming the file, line (row for Parquet) and field of the first bad record.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"scores table not found: {path}")
    if path.suffix == ".parquet":
        return _load_parquet(path)
    if path.stat().st_size == 0:
        return frame_from_rows([])
    try:
        frame = _read_fast(path)
    except Exception:  # noqa: BLE001 - any parse problem is re-diagnosed line by line below
        frame = None
    if frame is None or not _bulk_valid(frame):
        _raise_first_error(path)
        # The slow path found nothing wrong (e.g. a pyarrow quirk): trust it.
        return frame_from_rows(read_scores(path))
    return frame


def _load_parquet(path: Path) -> pd.DataFrame:
    raw = pd.read_parquet(path)
    missing = [c for c in COLUMNS if c not in raw.columns]
    if missing:
        raise ValueError(f"{path}: scores table lacks column(s) {missing}")
    frame = _normalise(raw)
    if not _bulk_valid(frame):
        for i, data in enumerate(raw[list(COLUMNS)].to_dict("records")):
            score = data["score"]
            data["score"] = None if score is None or pd.isna(score) else float(score)
            try:
                ScoreRow(**data)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{path}: row {i}: invalid scores row: {exc}") from exc
        raise ValueError(f"{path}: a key column holds nulls")
    return frame


def _read_fast(path: Path) -> pd.DataFrame:
    import pyarrow as pa
    from pyarrow import json as pa_json

    schema = pa.schema(
        [(c, pa.string()) for c in _STRING_COLUMNS if c != "status"]
        + [("score", pa.float64()), ("status", pa.string())]
    )
    table = pa_json.read_json(
        path,
        read_options=pa_json.ReadOptions(block_size=1 << 24),
        parse_options=pa_json.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"
        ),
    )
    frame = table.select(list(COLUMNS)).to_pandas()
    return _normalise(frame)


def _normalise(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.loc[:, list(COLUMNS)].copy()
    for col in _STRING_COLUMNS:
        frame[col] = frame[col].astype("category")
    frame["score"] = pd.to_numeric(frame["score"], errors="coerce").astype("float64")
    return frame.reset_index(drop=True)


def _bulk_valid(frame: pd.DataFrame) -> bool:
    for col in _STRING_COLUMNS:
        if frame[col].isna().any():
            return False
    if not set(frame["kind"].cat.categories) <= set(KINDS):
        return False
    if not set(frame["track"].cat.categories) <= set(TRACKS):
        return False
    if not set(frame["status"].cat.categories) <= set(STATUSES):
        return False
    ok = (frame["status"] == "ok").to_numpy()
    score = frame["score"].to_numpy()
    return bool(np.isfinite(score[ok]).all())


def _raise_first_error(path: Path) -> None:
    """Re-read line by line; raise ValueError on the first record that breaks the contract."""
    import json

    for line, data in _rows_with_lines(path, json):
        for col in COLUMNS:
            if col not in data:
                raise ValueError(f"{path}:{line}: scores row lacks field {col!r}")
        for col in _STRING_COLUMNS:
            if not isinstance(data[col], str):
                raise ValueError(
                    f"{path}:{line}: field {col!r} must be a string, got {data[col]!r}"
                )
        score = data["score"]
        if score is not None and (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise ValueError(
                f"{path}:{line}: field 'score' must be a finite number or null, got {score!r}"
            )
        try:
            ScoreRow(**{k: data[k] for k in COLUMNS})
        except ValueError as exc:
            raise ValueError(f"{path}:{line}: invalid scores row: {exc}") from exc


def _rows_with_lines(path: Path, json_module):
    with open(path, encoding="utf-8") as fh:
        for line, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                data = json_module.loads(text)
            except ValueError as exc:
                raise ValueError(f"{path}:{line}: not valid JSON: {exc}") from exc
            if not isinstance(data, dict):
                raise ValueError(f"{path}:{line}: a scores row must be a JSON object")
            yield line, data


def check_unique_keys(frame: pd.DataFrame, source: str = "scores table") -> None:
    """Raise ValueError if a (system, example, kind, track, evaluator, criterion) key repeats."""
    if frame.empty:
        return
    dup = frame.duplicated(subset=list(KEY_COLUMNS)).to_numpy()
    if dup.any():
        row = frame.iloc[int(np.argmax(dup))]
        key = ", ".join(f"{c}={row[c]!r}" for c in KEY_COLUMNS)
        raise ValueError(f"{source}: duplicate scores row for ({key})")


def category_codes(series: pd.Series, categories: tuple[str, ...] | list[str]) -> np.ndarray:
    """Positions of each value in ``categories`` (-1 if absent), via category codes (fast)."""
    if not isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype("category")
    position = {c: i for i, c in enumerate(categories)}
    lookup = np.array(
        [position.get(str(c), -1) for c in series.cat.categories] + [-1], dtype=np.int64
    )
    return lookup[series.cat.codes.to_numpy()]  # code -1 (NaN) picks the trailing -1


def column_values(series: pd.Series) -> np.ndarray:
    """Object array of the column's string values, cheap for categorical columns."""
    if not isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype("category")
    cats = np.array([str(c) for c in series.cat.categories] + [""], dtype=object)
    return cats[series.cat.codes.to_numpy()]
