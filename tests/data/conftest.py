"""Fixtures for the dataset tests: a writable copy of the bundled demo in the release layout."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omnistory_core.data import demo_root
from omnistory_core.data.schema import PARQUET_RELATIVE_PATH

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def release(tmp_path: Path) -> Path:
    """A copy of the demo dataset in tmp_path, safe to corrupt."""
    target = tmp_path / "release"
    shutil.copytree(demo_root(), target)
    return target


def _read_rows(root: Path) -> list[dict[str, Any]]:
    return pq.read_table(root / PARQUET_RELATIVE_PATH).to_pylist()


def _write_rows(root: Path, rows: list[dict[str, Any]]) -> None:
    schema = pa.schema([(name, pa.string()) for name in rows[0]])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), root / PARQUET_RELATIVE_PATH)


@pytest.fixture
def read_rows() -> Callable[[Path], list[dict[str, Any]]]:
    """read_rows(root): the parquet rows of a release folder."""
    return _read_rows


@pytest.fixture
def edit_rows() -> Callable[[Path, Callable[[list[dict[str, Any]]], None]], list[dict[str, Any]]]:
    """edit_rows(root, fn): apply fn to the parquet rows (in place) and write them back."""

    def edit(root: Path, fn: Callable[[list[dict[str, Any]]], None]) -> list[dict[str, Any]]:
        rows = _read_rows(root)
        fn(rows)
        _write_rows(root, rows)
        return rows

    return edit


@pytest.fixture(scope="session")
def demo_tool():
    """The demo generator script, imported from tools/ (it is not part of the package)."""
    path = REPO_ROOT / "tools" / "make_demo_dataset.py"
    spec = importlib.util.spec_from_file_location("make_demo_dataset", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module
