"""Load and validate a local copy of the Omni-StoryBench release.

Layout (the Hugging Face dataset ``snu-aidas/Omni-StoryBench``)::

    <root>/data/omni_storybench.parquet
    <root>/samples/<source>/<book>/<from>__<to>.json
    <root>/metadata/<source>/<book>.json
    <root>/images/<source>/<book>/<page>.<ext>
    <root>/texts/<source>/<book>/<page>.txt

Every row is validated before anything is returned, and all findings are reported together in
one :class:`DatasetError`, so a broken dataset stops a run before any generation starts.

Newer releases may add keys (a parquet column, a per-sample JSON key): these are ignored with one
warning that counts them, unless ``strict`` asks for them to be refused.  Missing or malformed
required fields are always errors.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnistory_core.contract import Page, Reference, SpeechTarget, StoryExample
from omnistory_core.data.errors import DatasetError, Problem
from omnistory_core.data.schema import (
    ABSENT_SPEECH_INTENT,
    BOOK_METADATA_COLUMNS,
    CONDITION_TEXT_COLUMNS,
    ID_COLUMNS,
    IMAGE_COLUMNS,
    LABEL_COLUMNS,
    LIST_COLUMNS,
    NON_EMPTY_COLUMNS,
    PARQUET_RELATIVE_PATH,
    PATH_COLUMNS,
    REQUIRED_COLUMNS,
    SPEECH_FIELDS,
    decode_list_column,
    expected_id,
    sample_view,
)

MAX_DIFFS_PER_SAMPLE = 5

log = logging.getLogger("omnistory.data")


@dataclass
class _Unknown:
    """Where one unknown key occurs: its first place (for the strict error) and how often."""

    first: Problem
    where: str
    count: int = 0


@dataclass
class UnknownKeys:
    """Keys the release schema does not define, collected over all rows."""

    n_rows: int = 0
    found: dict[tuple[str, str], _Unknown] = field(default_factory=dict)

    def add(self, where: str, problem: Problem) -> None:
        # characters[0].x and characters[1].x are one key of the schema, counted together.
        name = re.sub(r"\[\d+\]", "[*]", problem.field)
        entry = self.found.setdefault((where, name), _Unknown(problem, where))
        entry.count += 1

    def __bool__(self) -> bool:
        return bool(self.found)

    def summary(self) -> str:
        parts = [
            f"{name!r} ({entry.where}, {entry.count} of {self.n_rows} rows)"
            for (_, name), entry in sorted(self.found.items())
        ]
        total = sum(entry.count for entry in self.found.values())
        return f"{total} occurrence(s) of {len(parts)} unknown key(s): {', '.join(parts)}"

    def problems(self) -> list[Problem]:
        """One problem per distinct key, at its first occurrence."""
        out = []
        for entry in self.found.values():
            first = entry.first
            message = (
                f"unknown key ({entry.where}, {entry.count} of {self.n_rows} rows); "
                "dataset.strict=true refuses keys the release schema does not define"
            )
            out.append(Problem(first.file, first.field, message, first.row, first.example_id))
        return out


def load_official(
    root: str | os.PathLike[str], *, limit: int | None = None, strict: bool = False
) -> list[StoryExample]:
    """Load the release at ``root`` as :class:`StoryExample` objects in parquet row order.

    ``StoryExample.index`` is the row number, i.e. the candidate index of the official output
    layout.  ``limit`` keeps the first ``limit`` rows (and only those are validated).  Paths in
    the examples are absolute; ``extra`` keeps the root-relative paths, the dataset root, any
    normalisation applied and parquet columns beyond the required ones.

    Keys the release schema does not define (extra parquet columns, extra per-sample JSON keys)
    are logged once as a warning with their count; with ``strict`` they are errors instead.
    Empty free-text fields (book metadata, ``scene``, ``text_instruction``, ``ambient_sound``) are
    valid.

    Raises :class:`DatasetError` if the parquet cannot be read, a required column is missing, or
    any row fails validation (labels, the id rule, missing files, list-column JSON, empty
    required text, disagreement with its per-sample JSON).
    """
    limit = check_limit(limit)
    root_path = Path(root).expanduser().resolve()
    if not root_path.is_dir():
        raise DatasetError(
            f"Omni-StoryBench root {root_path} is not a directory; pass dataset.root=PATH to a "
            "local copy of the release (the folder that contains data/omni_storybench.parquet)"
        )
    rows, other_columns = _read_rows(root_path)
    if not rows:
        raise DatasetError(f"{root_path / PARQUET_RELATIVE_PATH} has no rows")
    if limit is not None:
        rows = rows[:limit]

    problems: list[Problem] = []
    examples: list[StoryExample] = []
    first_row_of: dict[str, int] = {}
    unknown = UnknownKeys(n_rows=len(rows))
    for index, row in enumerate(rows):
        row_problems, example = _check_row(row, index, root_path, other_columns, unknown)
        example_id = row.get("id")
        if isinstance(example_id, str):
            if example_id in first_row_of:
                row_problems.append(
                    Problem(
                        PARQUET_RELATIVE_PATH,
                        "id",
                        f"duplicate id (first used by row {first_row_of[example_id]})",
                        index,
                        example_id,
                    )
                )
            else:
                first_row_of[example_id] = index
        problems += row_problems
        if example is not None:
            examples.append(example)
    if unknown and strict:
        problems += unknown.problems()
    if problems:
        raise DatasetError(f"Omni-StoryBench dataset at {root_path} failed validation", problems)
    if unknown:
        log.warning(
            "dataset at %s: ignored %s (set dataset.strict=true to refuse them)",
            root_path,
            unknown.summary(),
        )
    return examples


def check_limit(limit: Any) -> int | None:
    """Return ``limit`` if it is ``None`` or an int >= 0; otherwise raise :class:`DatasetError`."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise DatasetError(f"dataset limit must be a non-negative integer or null, got {limit!r}")
    return limit


# -- reading ----------------------------------------------------------------------------------


def _read_rows(root: Path) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    from omnistory_core.data.parquet_rows import cached_rows

    path = root / PARQUET_RELATIVE_PATH
    if not path.is_file():
        raise DatasetError(
            f"{path} does not exist: {root} does not look like the Omni-StoryBench release "
            f"(expected {PARQUET_RELATIVE_PATH}, samples/, metadata/, images/, texts/)"
        )
    rows, columns = cached_rows(path, _read_parquet)
    missing = [name for name in REQUIRED_COLUMNS if name not in columns]
    if missing:
        raise DatasetError(
            f"parquet file {path} lacks required columns",
            [
                Problem(PARQUET_RELATIVE_PATH, name, "required column is missing")
                for name in missing
            ],
        )
    other = tuple(name for name in columns if name not in REQUIRED_COLUMNS)
    return rows, other


def _read_parquet(path: Path) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # ParquetFile, not read_table: read_table goes through pyarrow.dataset, which imports
        # pandas (about a second of every run's start-up, for one small file)
        with pq.ParquetFile(path) as handle:
            table = handle.read()
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise DatasetError(f"cannot read parquet file {path}: {exc}") from exc
    return table.to_pylist(), tuple(table.column_names)


# -- one row ----------------------------------------------------------------------------------


def _check_row(
    row: dict[str, Any],
    index: int,
    root: Path,
    other_columns: tuple[str, ...],
    unknown: UnknownKeys,
) -> tuple[list[Problem], StoryExample | None]:
    """Validate one row; return its problems and, when there are none, the example.

    Unknown keys go to ``unknown`` rather than to the problems: whether they are errors is the
    caller's decision (``strict``).
    """
    raw_id = row.get("id")
    example_id = raw_id if isinstance(raw_id, str) and raw_id else None
    problems: list[Problem] = []

    def report(field: str, message: str, file: str = PARQUET_RELATIVE_PATH) -> None:
        problems.append(Problem(file, field, message, index, example_id))

    for name in other_columns:
        unknown.add(
            "parquet column",
            Problem(PARQUET_RELATIVE_PATH, name, "unknown column", index, example_id),
        )

    for name in REQUIRED_COLUMNS:
        if name in LIST_COLUMNS:
            continue
        value = row.get(name)
        if value is None:
            report(name, "value is missing (null)")
        elif not isinstance(value, str):
            report(name, f"expected a string, got {type(value).__name__} {value!r}")
        elif name in NON_EMPTY_COLUMNS and not value.strip():
            report(name, "required text is empty")

    ids = [value for name in ID_COLUMNS if isinstance(value := row.get(name), str)]
    if len(ids) == len(ID_COLUMNS) and all(value.strip() for value in ids):
        wanted = expected_id(*ids[1:])
        if ids[0] != wanted:
            report("id", f"{ids[0]!r} does not match source/book/from_key__to_key = {wanted!r}")

    labels: dict[str, str] = {}
    for name, allowed in LABEL_COLUMNS.items():
        value = row.get(name)
        if isinstance(value, str) and value.strip():
            # The official speech-metadata scorer compares labels after strip().lower(), so a
            # case variant is the same label; anything else is outside the paper's label set.
            canonical = value.strip().lower()
            if canonical in allowed:
                labels[name] = canonical
            else:
                report(name, f"{value!r} is not one of {', '.join(allowed)}")

    decoded: dict[str, list[dict[str, Any]]] = {}
    for name in LIST_COLUMNS:
        try:
            decoded[name] = decode_list_column(row.get(name))
        except ValueError as exc:
            report(name, str(exc))

    files: dict[str, Path] = {}
    for name in PATH_COLUMNS:
        value = row.get(name)
        if not (isinstance(value, str) and value.strip()):
            continue  # already reported above
        path, reason = _dataset_file(root, value)
        if reason:
            report(name, reason)
        else:
            files[name] = path
    for name in IMAGE_COLUMNS:
        if name in files and (reason := _image_problem(files[name])):
            report(name, f"{row[name]}: {reason}")

    if "sample_path" in files and len(decoded) == len(LIST_COLUMNS):
        sample_file = row["sample_path"]
        extra_keys: list[str] = []
        for name, message in _sample_differences(files["sample_path"], row, decoded, extra_keys):
            report(name, message, file=sample_file)
        for name in extra_keys:
            unknown.add(
                "per-sample JSON",
                Problem(sample_file, name, "unknown key", index, example_id),
            )

    if problems:
        return problems, None
    return [], _build_example(row, index, root, decoded, labels, files, other_columns)


def _dataset_file(root: Path, relative: str) -> tuple[Path, str | None]:
    """Resolve a root-relative path; return (path, reason it is unusable or None)."""
    if os.path.isabs(relative):
        return Path(relative), f"path {relative!r} must be relative to the dataset root"
    # Normalise lexically rather than with resolve(): a Hugging Face cache snapshot stores its
    # files as symlinks into a blob folder outside the snapshot, which is fine.
    path = Path(os.path.normpath(root / relative))
    if path != root and root not in path.parents:
        return path, f"path {relative!r} escapes the dataset root"
    if not path.is_file():
        return path, f"file {relative!r} does not exist (looked for {path})"
    if path.stat().st_size == 0:
        return path, f"file {relative!r} is empty"
    return path, None


def _image_problem(path: Path) -> str | None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:  # reads the header only
            width, height = image.size
    except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError) as exc:
        return f"not a readable image ({exc})"
    if width <= 0 or height <= 0:
        return "image has no pixels"
    return None


def _sample_differences(
    path: Path,
    row: dict[str, Any],
    decoded: dict[str, list[dict[str, Any]]],
    extra_keys: list[str],
) -> list[tuple[str, str]]:
    """Compare the per-sample JSON with the row, as the official evaluator does (exact equality).

    Keys the row has no counterpart for are appended to ``extra_keys`` instead of being reported:
    the official evaluator compares the fields it knows, so a newer release may add keys.
    """
    try:
        sample = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return [("(file)", f"per-sample JSON cannot be read: {exc}")]
    expected = sample_view({**row, **decoded})
    if isinstance(sample, dict):
        _tolerate_absent_speech_intent(sample, expected)
    diffs: list[tuple[str, str]] = []
    _diff(sample, expected, "", diffs, extra_keys)
    if len(diffs) > MAX_DIFFS_PER_SAMPLE:
        hidden = len(diffs) - MAX_DIFFS_PER_SAMPLE
        diffs = diffs[:MAX_DIFFS_PER_SAMPLE] + [("(file)", f"{hidden} more difference(s)")]
    return diffs


def _tolerate_absent_speech_intent(sample: dict[str, Any], expected: dict[str, Any]) -> None:
    """Treat ``speech_intent: ""`` in the row and an absent key in the sample JSON as equal.

    The parquet exporter wrote absent ``speech_intent`` keys as "" (a known release quirk).
    """
    try:
        got = sample["next_page_condition"]["characters"]
        want = expected["next_page_condition"]["characters"]
    except (KeyError, TypeError):
        return
    if not (isinstance(got, list) and len(got) == len(want)):
        return
    for got_item, want_item in zip(got, want, strict=True):
        if (
            isinstance(got_item, dict)
            and "speech_intent" not in got_item
            and want_item.get("speech_intent") == ""
        ):
            del want_item["speech_intent"]


def _diff(
    got: Any, want: Any, where: str, out: list[tuple[str, str]], extra_keys: list[str]
) -> None:
    label = where or "(root)"
    if isinstance(want, dict) and isinstance(got, dict):
        for key in want:
            child = f"{where}.{key}" if where else key
            if key not in got:
                out.append((child, "missing from the per-sample JSON"))
            else:
                _diff(got[key], want[key], child, out, extra_keys)
        for key in got:
            if key not in want:
                extra_keys.append(f"{where}.{key}" if where else key)
        return
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for position, (got_item, want_item) in enumerate(zip(got, want, strict=True)):
            _diff(got_item, want_item, f"{where}[{position}]", out, extra_keys)
        return
    if got != want:
        out.append(
            (label, f"per-sample JSON has {_short(got)} but the parquet row has {_short(want)}")
        )


def _short(value: Any, width: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def _build_example(
    row: dict[str, Any],
    index: int,
    root: Path,
    decoded: dict[str, list[dict[str, Any]]],
    labels: dict[str, str],
    files: dict[str, Path],
    other_columns: tuple[str, ...],
) -> StoryExample:
    example_id = row["id"]
    characters = decoded["condition_characters"]
    normalisations: list[str] = []
    quirk_name = ABSENT_SPEECH_INTENT.get(example_id)
    if quirk_name is not None:
        for position, character in enumerate(characters):
            if character.get("name") == quirk_name and character.get("speech_intent") == "":
                del character["speech_intent"]
                normalisations.append(
                    f"condition_characters[{position}].speech_intent: removed the empty value the "
                    "parquet exporter wrote for an absent key"
                )
    speech = {name: row[f"speech_{name}"] for name in SPEECH_FIELDS}
    speech.update({column[len("speech_") :]: value for column, value in labels.items()})
    return StoryExample(
        id=example_id,
        index=index,
        source=row["source"],
        book=row["book"],
        from_key=row["from_key"],
        to_key=row["to_key"],
        current=Page(image=str(files["current_image"]), text=row["current_text"]),
        metadata={
            **{name: row[name] for name in BOOK_METADATA_COLUMNS},
            "characters": decoded["book_characters"],
        },
        conditions={
            "characters": characters,
            **{name: row[name] for name in CONDITION_TEXT_COLUMNS},
        },
        reference=Reference(
            next_page=Page(image=str(files["next_image"]), text=row["next_text"]),
            speech=SpeechTarget(**speech),
        ),
        extra={
            "dataset_root": str(root),
            "relative_paths": {name: row[name] for name in PATH_COLUMNS},
            "files": {name: str(path) for name, path in files.items()},
            "normalisations": normalisations,
            "other_columns": {name: row.get(name) for name in other_columns},
        },
    )
