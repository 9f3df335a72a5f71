"""A release's parquet file as rows of plain values, remembered by the file's content.

Reading the parquet is cheap; importing pyarrow (and numpy with it) to read it is not: about a
fifth of a second of CPU in every process that loads the dataset, which for a small release is
most of what loading it costs (a sweep's jobs, every ``evaluate``).  So the rows read once are
kept on disk as JSON, under the SHA-256 of the file's bytes (``$XDG_CACHE_HOME/omnistory/
parquet-rows``, else ``~/.cache/omnistory/parquet-rows``; ``$OMNISTORY_PARQUET_ROWS_CACHE``
overrides it): a file with other bytes, wherever it lies, is another entry, so nothing can be
served stale.  Rows whose values JSON does not give back as they were (bytes, timestamps, a map
column's pairs) are not kept: such a file is read with pyarrow every time.  A cache that cannot
be read or written is skipped.

Pure standard library until pyarrow is needed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omnistory_core.files import atomic_write_bytes, user_cache_dir

#: where the cache lies (overrides the default in the module docstring)
CACHE_ENV = "OMNISTORY_PARQUET_ROWS_CACHE"

Rows = tuple[list[dict[str, Any]], tuple[str, ...]]


def cache_dir() -> Path:
    return user_cache_dir("parquet-rows", CACHE_ENV)


def cached_rows(path: Path, read: Callable[[Path], Rows]) -> Rows:
    """The rows and column names of the parquet file at ``path``: from the cache when a file
    with the same bytes was read before, else ``read(path)`` (which raises for a file it cannot
    read), kept for next time."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    entry = cache_dir() / f"{digest}.json"
    found = _load(entry)
    if found is not None:
        return found
    rows, columns = read(path)
    _store(entry, rows, columns)
    return rows, columns


def _load(entry: Path) -> Rows | None:
    try:
        payload = json.loads(entry.read_text(encoding="utf-8"))
        rows, columns = payload["rows"], payload["columns"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(rows, list) or not isinstance(columns, list):
        return None
    return rows, tuple(str(c) for c in columns)


def _store(entry: Path, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> None:
    payload = {"columns": list(columns), "rows": rows}
    try:
        text = json.dumps(payload, ensure_ascii=False)
    except (TypeError, ValueError):
        return  # bytes, a timestamp: not JSON
    if json.loads(text) != payload:
        return  # JSON would not give these values back as they are (a map column's pairs)
    try:
        atomic_write_bytes(entry, text.encode("utf-8"))  # a reader never sees half an entry
    except OSError:
        return
