"""The release's parquet rows, remembered by the file's bytes
(``omnistory_core.data.parquet_rows``): a process loading a release read before imports neither
pyarrow nor numpy and gets the same examples; other bytes at the same path are read again;
values JSON would change are not kept; a cache that cannot be written changes nothing but the
time."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from omnistory_core.data import load_official
from omnistory_core.data.parquet_rows import CACHE_ENV, cached_rows
from omnistory_core.data.schema import PARQUET_RELATIVE_PATH

LOAD = """
import dataclasses, json, sys
from omnistory_core.data import load_official
examples = load_official(sys.argv[1])
print(json.dumps({
    "examples": [dataclasses.asdict(e) for e in examples],
    "pyarrow": "pyarrow" in sys.modules,
    "numpy": "numpy" in sys.modules,
}))
"""


def _load(release: Path, cache: Path) -> dict:
    env = {**os.environ, CACHE_ENV: str(cache)}
    proc = subprocess.run(
        [sys.executable, "-c", LOAD, str(release)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_a_release_read_before_loads_without_pyarrow_and_the_same(
    release: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = _load(release, cache)
    assert first["pyarrow"]  # read for the first time
    assert len(list(cache.glob("*.json"))) == 1
    again = _load(release, cache)
    assert again == {"examples": first["examples"], "pyarrow": False, "numpy": False}


def test_other_bytes_at_the_same_path_are_read_again(
    release: Path, tmp_path: Path, monkeypatch, edit_rows
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    before = load_official(release)
    edit_rows(release, lambda rows: rows.__delitem__(slice(4, None)))
    after = load_official(release)
    assert len(before) > 4 and [e.id for e in after] == [e.id for e in before[:4]]
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2


def test_values_json_would_change_are_read_every_time(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    path = tmp_path / "rows.parquet"
    path.write_bytes(b"not read: the reader stands in for pyarrow")
    calls = []

    def read(p: Path):
        calls.append(p)
        return [{"raw": b"\x00\x01", "pairs": [("a", 1)]}], ("raw", "pairs")

    assert cached_rows(path, read) == cached_rows(path, read)
    assert len(calls) == 2 and not (tmp_path / "cache").exists()


def test_a_cache_that_cannot_be_written_is_skipped(
    release: Path, tmp_path: Path, monkeypatch
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("the cache folder's place is taken")
    monkeypatch.setenv(CACHE_ENV, str(blocked / "cache"))
    assert [e.id for e in load_official(release)] == [e.id for e in load_official(release)]


def test_a_damaged_entry_is_read_again(release: Path, tmp_path: Path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    expected = [dataclasses.asdict(e) for e in load_official(release)]
    (entry,) = cache.glob("*.json")
    entry.write_text('{"rows": [{"id"', encoding="utf-8")
    assert [dataclasses.asdict(e) for e in load_official(release)] == expected
    assert json.loads(entry.read_text(encoding="utf-8"))["rows"]


def test_required_columns_are_checked_on_a_remembered_file(
    release: Path, tmp_path: Path, monkeypatch
) -> None:
    """The cache keeps what the file holds, not that it was valid: the checks run each time."""
    from omnistory_core.data import DatasetError

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    path = release / PARQUET_RELATIVE_PATH
    rows, columns = cached_rows(path, lambda p: ([{"id": "x"}], ("id",)))
    assert columns == ("id",)
    with pytest.raises(DatasetError, match="lacks required columns"):
        load_official(release)
