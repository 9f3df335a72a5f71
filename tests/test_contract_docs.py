"""CONTRIBUTING.md documents ``metadata`` and ``conditions`` key by key, and that table is the one
:mod:`omnistory_core.contract_docs` renders from the contract: it cannot drift from the data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from omnistory_core import contract_docs
from omnistory_core.contract_docs import (
    BLOCK_END,
    BLOCK_START,
    BOOK_CHARACTER,
    CONDITION_CHARACTER,
    conditions_and_metadata_table,
    replace_block,
    schema_keys,
)
from omnistory_core.data.demo import load_demo

CONTRIBUTING = Path(__file__).resolve().parents[1] / "CONTRIBUTING.md"


def _block(text: str) -> str:
    start, end = text.index(BLOCK_START), text.index(BLOCK_END) + len(BLOCK_END)
    return text[start:end]


def test_contributing_holds_the_rendered_table() -> None:
    text = CONTRIBUTING.read_text(encoding="utf-8")
    assert text.count(BLOCK_START) == 1 and text.count(BLOCK_END) == 1
    assert _block(text) == conditions_and_metadata_table(), (
        "CONTRIBUTING.md's conditions-and-metadata block is stale: run"
        " `python -m omnistory_core.contract_docs CONTRIBUTING.md`"
    )
    assert replace_block(text) == text


def test_every_key_of_a_loaded_example_is_documented_and_no_other() -> None:
    examples = load_demo()
    table = conditions_and_metadata_table()
    for field in ("metadata", "conditions"):
        seen = {key for ex in examples for key in getattr(ex.input_view(), field)}
        assert seen == set(schema_keys(field)), field
        for key in seen:
            assert f'`{field}["{key}"]`' in table, key
    sheets = {k for ex in examples for c in ex.metadata["characters"] for k in c}
    assert sheets == set(BOOK_CHARACTER)
    on_page = {k for ex in examples for c in ex.conditions["characters"] for k in c}
    assert on_page == set(CONDITION_CHARACTER)


def test_each_row_gives_a_key_a_type_a_column_and_a_meaning() -> None:
    rows = [r for r in conditions_and_metadata_table().splitlines() if r.startswith("| `")]
    assert len(rows) == len(schema_keys("metadata")) + len(BOOK_CHARACTER) + len(
        schema_keys("conditions")
    ) + len(CONDITION_CHARACTER)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == 4 and all(cells), row
        assert re.fullmatch(r"`(metadata|conditions)\[.*\]`", cells[0]), row
    scene = next(r for r in rows if r.startswith('| `conditions["scene"]`'))
    assert '`""` (no constraint)' in scene  # free text the loader accepts empty


def test_a_schema_key_without_a_documented_meaning_refuses_to_render(monkeypatch) -> None:
    monkeypatch.setattr(
        contract_docs, "CONDITION_TEXT_COLUMNS", (*contract_docs.CONDITION_TEXT_COLUMNS, "mood")
    )
    with pytest.raises(ValueError, match="document each key here"):
        conditions_and_metadata_table()
