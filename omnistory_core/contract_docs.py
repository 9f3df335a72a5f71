"""What a component finds in ``item["metadata"]`` and ``item["conditions"]``, key by key: the
tables of CONTRIBUTING.md's "What a component reads", rendered from the contract.

The keys are not written here: they come from :class:`omnistory_core.contract.ExampleInput` (the
two fields) and the release schema :mod:`omnistory_core.data.schema` (the parquet columns each
dict is built from, as :mod:`omnistory_core.data.official` builds it). Only each key's type and
meaning are written here, and :func:`conditions_and_metadata_table` refuses to render while a key
of the schema has no entry or an entry names no key, so the document cannot drift from the data.
``tests/test_contract_docs.py`` checks that CONTRIBUTING.md holds the rendered text.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from omnistory_core.contract import ExampleInput
from omnistory_core.data.schema import (
    BOOK_METADATA_COLUMNS,
    CONDITION_TEXT_COLUMNS,
    FREE_TEXT_COLUMNS,
)

BLOCK_START = "<!-- conditions-and-metadata:start -->"
BLOCK_END = "<!-- conditions-and-metadata:end -->"

#: the list key of both dicts, and the parquet column (JSON text) each one is decoded from
CHARACTERS = "characters"
CHARACTER_COLUMNS = {"metadata": "book_characters", "conditions": "condition_characters"}


@dataclass(frozen=True)
class KeyDoc:
    """One key: its type as a component receives it, and what it holds."""

    type: str
    meaning: str


#: ``metadata``: the book, the same for every page of it
METADATA: dict[str, KeyDoc] = {
    "genre": KeyDoc("str", "the book's genre, e.g. `Fantasy`"),
    "topic": KeyDoc("str", "what the whole book is about, in one sentence"),
    "style": KeyDoc("str", "the book's art style, e.g. `flat shapes, night colours`"),
    "narrative_tense": KeyDoc("str", "the tense the book is told in, e.g. `Past`"),
    "narrative_perspective": KeyDoc("str", "who tells it, e.g. `Third-person omniscient`"),
    CHARACTERS: KeyDoc("list[dict]", "the book's character sheets, one object per character"),
}
#: ``metadata["characters"][i]``: one character sheet (free-form objects in the release)
BOOK_CHARACTER: dict[str, KeyDoc] = {
    "name": KeyDoc("str", "the character's name, as `conditions` and the narration use it"),
    "sex": KeyDoc("str", "`female` or `male` as a rule (the plan's `speech.gender` is a label)"),
    "age_range": KeyDoc("str", 'e.g. `6-8`; `""` when the book does not tell'),
    "species": KeyDoc("str", "e.g. `human`, `fox`, `moon`"),
    "role": KeyDoc("str", "the part in the story, e.g. `protagonist`, `helper`"),
    "personality": KeyDoc("list[str]", "traits, e.g. `curious`, `gentle`"),
    "appearance": KeyDoc("str", "how to draw the character, kept the same on every page"),
}
#: ``conditions``: what the next page must show, say and sound like
CONDITIONS: dict[str, KeyDoc] = {
    CHARACTERS: KeyDoc("list[dict]", "the characters on the next page, one object each"),
    "scene": KeyDoc("str", "the next page's setting and what is in the picture"),
    "text_instruction": KeyDoc("str", "what the next page's narration must tell (its goal)"),
    "ambient_sound": KeyDoc("str", "the background sound of the next page"),
}
#: ``conditions["characters"][i]``: one character of the next page
CONDITION_CHARACTER: dict[str, KeyDoc] = {
    "name": KeyDoc("str", 'who: a `name` of `metadata["characters"]`'),
    "emotion": KeyDoc(
        "str", "free text, e.g. `urgent` (the plan's `speech.emotion` is a label of `EMOTIONS`)"
    ),
    "speech_intent": KeyDoc(
        "str",
        "what the character means to say, e.g. `stays silent`; the key may be absent",
    ),
    "action": KeyDoc("str", "what the character does on the next page"),
    "visibility": KeyDoc("str", "how much of the character the picture shows"),
}


def schema_keys(field: str) -> tuple[str, ...]:
    """The keys of ``ExampleInput.<field>`` (``metadata`` or ``conditions``), in the order the
    loader builds them from the release columns."""
    if field == "metadata":
        return (*BOOK_METADATA_COLUMNS, CHARACTERS)
    if field == "conditions":
        return (CHARACTERS, *CONDITION_TEXT_COLUMNS)
    raise ValueError(f"ExampleInput has no dict field {field!r} documented here")


def _documented(field: str) -> dict[str, KeyDoc]:
    docs = {"metadata": METADATA, "conditions": CONDITIONS}[field]
    keys = schema_keys(field)
    if set(docs) != set(keys):
        raise ValueError(
            f"omnistory_core.contract_docs: {field} keys of the schema {sorted(keys)} and"
            f" documented {sorted(docs)} differ; document each key here"
        )
    return {key: docs[key] for key in keys}


def _column(field: str, key: str) -> str:
    return CHARACTER_COLUMNS[field] if key == CHARACTERS else key


#: what an empty free-text value means (the loader accepts "" for these columns)
_EMPTY = {"metadata": "unknown", "conditions": "no constraint"}


def _meaning(field: str, key: str, doc: KeyDoc) -> str:
    empty = f'; may be `""` ({_EMPTY[field]})' if key in FREE_TEXT_COLUMNS else ""
    return doc.meaning + empty


def _rows(field: str) -> list[str]:
    characters = {"metadata": BOOK_CHARACTER, "conditions": CONDITION_CHARACTER}[field]
    rows = []
    for key, doc in _documented(field).items():
        column = _column(field, key)
        rows.append(_row(f'{field}["{key}"]', doc.type, column, _meaning(field, key, doc)))
        if key == CHARACTERS:
            rows += [
                _row(f'{field}["{key}"][i]["{sub}"]', sub_doc.type, column, sub_doc.meaning)
                for sub, sub_doc in characters.items()
            ]
    return rows


def _row(key: str, type_: str, column: str, meaning: str) -> str:
    return f"| `{key}` | `{type_}` | `{column}` | {meaning} |"


def conditions_and_metadata_table() -> str:
    """The marked block of CONTRIBUTING.md: one table over both dicts, markers included."""
    fields = [f.name for f in dataclasses.fields(ExampleInput)]
    missing = [f for f in ("metadata", "conditions") if f not in fields]
    if missing:
        raise ValueError(
            f"ExampleInput has no field {missing}; update omnistory_core.contract_docs"
        )
    lines = [
        BLOCK_START,
        "<!-- generated by omnistory_core.contract_docs.conditions_and_metadata_table(); do not"
        " edit by hand -->",
        "",
        "| key | type | release column | meaning |",
        "|---|---|---|---|",
        *_rows("metadata"),
        *_rows("conditions"),
        "",
        BLOCK_END,
    ]
    return "\n".join(lines)


def replace_block(text: str, block: str | None = None) -> str:
    """``text`` (CONTRIBUTING.md) with its marked block replaced by the rendered one."""
    block = conditions_and_metadata_table() if block is None else block
    start, end = text.find(BLOCK_START), text.find(BLOCK_END)
    if start < 0 or end < start:
        raise ValueError(f"no {BLOCK_START} ... {BLOCK_END} block found")
    return text[:start] + block + text[end + len(BLOCK_END) :]


if __name__ == "__main__":  # python -m omnistory_core.contract_docs CONTRIBUTING.md: refresh it
    import sys
    from pathlib import Path

    for name in sys.argv[1:]:
        path = Path(name)
        path.write_text(replace_block(path.read_text(encoding="utf-8")), encoding="utf-8")
