"""Forward-compatible datasets: extra keys are one warning, empty free text is valid, required
fields stay required.  Driven through the real CLI on a copy of the bundled demo."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omnistory_testing import load_json, run_cli

from omnistory_core.data import DatasetError, demo_root, load_official
from omnistory_core.data.schema import PARQUET_RELATIVE_PATH

QUIET = "engine.progress=false"


def _rows(root: Path) -> list[dict]:
    return pq.read_table(root / PARQUET_RELATIVE_PATH).to_pylist()


def _write_rows(root: Path, rows: list[dict]) -> None:
    schema = pa.schema([(name, pa.string()) for name in rows[0]])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), root / PARQUET_RELATIVE_PATH)


def _newer_release(tmp_path: Path) -> Path:
    """The demo as a newer release might ship it: a ``license`` key per sample (parquet column and
    per-sample JSON) and empty free-text conditions."""
    root = tmp_path / "release"
    shutil.copytree(demo_root(), root)
    rows = _rows(root)
    for index, row in enumerate(rows):
        row["license"] = "CC-BY-4.0"
        row["ambient_sound"] = ""
        if index == 3:
            row["scene"] = ""
            row["text_instruction"] = "  "
        sample_path = root / row["sample_path"]
        sample = json.loads(sample_path.read_text(encoding="utf-8"))
        sample["license"] = "CC-BY-4.0"
        for name in ("ambient_sound", "scene", "text_instruction"):
            sample["next_page_condition"][name] = row[name]
        sample_path.write_text(json.dumps(sample, indent=2), encoding="utf-8")
    _write_rows(root, rows)
    return root


@pytest.fixture
def newer_release(tmp_path: Path) -> Path:
    return _newer_release(tmp_path)


def _run(tmp_path: Path, root: Path, *extra: str):
    return run_cli(
        "dataset=omnistorybench",
        f"dataset.root={root}",
        "output_root=out",
        QUIET,
        *extra,
        cwd=tmp_path,
    )


def test_extra_keys_and_empty_free_text_load_with_one_warning(tmp_path, newer_release) -> None:
    proc = _run(tmp_path, newer_release)
    assert proc.returncode == 0, proc.stderr
    output = proc.stdout + proc.stderr
    warnings = [line for line in output.splitlines() if "unknown key" in line]
    assert len(warnings) == 1, output
    assert "WARNING" in warnings[0] and "'license'" in warnings[0]
    assert "20 occurrence(s)" in warnings[0] and "10 of 10 rows" in warnings[0]
    assert "dataset.strict=true" in warnings[0]

    job = tmp_path / "out/runs/omnistorybench/template-copy-espeak"
    manifest = load_json(job / "manifest.json")
    assert manifest["n_examples"] == 10
    assert manifest["missing"] == {"text": 0, "image": 0, "speech": 0}
    assert manifest["dataset"]["strict"] is False
    assert len(list((job / "image").iterdir())) == 10


def test_strict_refuses_unknown_keys_naming_file_row_id_field(tmp_path, newer_release) -> None:
    proc = _run(tmp_path, newer_release, "dataset.strict=true")
    assert proc.returncode == 2, proc.stderr
    first = _rows(newer_release)[0]
    named = [
        line
        for line in proc.stderr.splitlines()
        if first["sample_path"] in line and "row 0," in line and first["id"] in line
    ]
    assert len(named) == 1, proc.stderr
    assert "field 'license'" in named[0] and "unknown key" in named[0]
    assert "10 of 10 rows" in named[0]
    # the parquet column is named too, once, not once per row
    column = [line for line in proc.stderr.splitlines() if "parquet column" in line]
    assert len(column) == 1 and PARQUET_RELATIVE_PATH in column[0]
    assert not list((tmp_path / "out").rglob("manifest.json"))


@pytest.mark.parametrize(
    "column,value,message",
    [
        ("ambient_sound", None, "value is missing (null)"),
        ("next_text", "", "required text is empty"),
        ("speech_pitch", "squeaky", "is not one of"),
    ],
)
def test_required_fields_stay_required(tmp_path, newer_release, column, value, message) -> None:
    rows = _rows(newer_release)
    rows[4][column] = value
    _write_rows(newer_release, rows)
    proc = _run(tmp_path, newer_release)
    assert proc.returncode == 2, proc.stderr
    line = next(
        (line for line in proc.stderr.splitlines() if f"field {column!r}" in line),
        None,
    )
    assert line is not None, proc.stderr
    assert PARQUET_RELATIVE_PATH in line and "row 4," in line and rows[4]["id"] in line
    assert message in line
    assert not list((tmp_path / "out").rglob("manifest.json"))


def test_unknown_keys_inside_lists_count_as_one_key(newer_release) -> None:
    rows = _rows(newer_release)
    for row in rows:
        sample_path = newer_release / row["sample_path"]
        sample = json.loads(sample_path.read_text(encoding="utf-8"))
        for character in sample["next_page_condition"]["characters"]:
            character["voice_id"] = "v1"
        sample_path.write_text(json.dumps(sample), encoding="utf-8")
    examples = load_official(newer_release)
    assert [e.conditions["ambient_sound"] for e in examples] == [""] * 10
    with pytest.raises(DatasetError) as info:
        load_official(newer_release, strict=True)
    fields = sorted(p.field for p in info.value.problems)
    assert fields == ["license", "license", "next_page_condition.characters[0].voice_id"]


def test_bad_strict_value_is_one_line(tmp_path) -> None:
    proc = run_cli("dataset.strict=maybe", "output_root=out", QUIET, cwd=tmp_path)
    assert proc.returncode == 2
    assert "dataset.strict must be true or false" in proc.stderr
