"""The job directory: what one system's run leaves on disk, with its one writer and one reader.

Layout (``i`` = dataset row index)::

    <job>/text/<i>/generated.txt     the official evaluator's candidate layout
    <job>/image/<i>/generated.png
    <job>/speech/<i>/generated.wav
    <job>/missing.txt                one line per missing output: index<TAB>modality<TAB>
                                     category<TAB>message (at pkg/module.py:LINE)
    <job>/plans.jsonl                per example: raw planner output, parsed plan, repairs, failure,
                                     per-field problems, usage, call key
    <job>/records.jsonl              per example and modality: ok + path, or the failure (category,
                                     message; exception and where for a component's exception)
    <job>/stats.json                 calls per component, missing outputs per modality and category
    <job>/manifest.json              written last (:func:`write_manifest`): a directory without it
                                     is incomplete, whatever else it holds

The writer (:func:`write_job_dir`, :func:`write_manifest`) takes plain values, so this module
needs nothing from the engine (the engine's :mod:`~omnistory_core.engine.outputs` turns a job's
result into them).  The reader (:func:`read_job_dir`, :func:`discover_job_dirs`) tolerates a partial
or hand-made directory (missing files, missing examples); a malformed file raises
:class:`JobDirError` naming the file, line and field.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.contract import MODALITIES, Failure
from omnistory_core.files import atomic_write_bytes, link_or_copy

__all__ = [
    "CANDIDATE_FILES",
    "MANIFEST",
    "MISSING",
    "PLANS",
    "RECORDS",
    "STATS",
    "ExampleOutputs",
    "JobDir",
    "JobDirError",
    "MissingOutput",
    "candidate_path",
    "discover_job_dirs",
    "missing_counts",
    "read_job_dir",
    "write_job_dir",
    "write_manifest",
]

#: the candidate file of each modality (the official evaluator's names)
CANDIDATE_FILES: dict[str, str] = {
    "text": "generated.txt",
    "image": "generated.png",
    "speech": "generated.wav",
}
MANIFEST = "manifest.json"
MISSING = "missing.txt"
PLANS = "plans.jsonl"
RECORDS = "records.jsonl"
STATS = "stats.json"


class JobDirError(ValueError):
    """A job directory file that does not parse; the message names the file, line and field."""


def candidate_path(index: int, modality: str) -> str:
    """Where the candidate of one example and modality lies, relative to the job directory (as
    ``records.jsonl`` gives it)."""
    return f"{modality}/{index}/{CANDIDATE_FILES[modality]}"


@dataclass(frozen=True)
class MissingOutput:
    """One output a job did not make, and why."""

    index: int
    example_id: str
    modality: str
    failure: Failure

    @property
    def category(self) -> str:
        return self.failure.category


# -- writing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExampleOutputs:
    """What one example left: per modality the narration (``str``), a file to link into the
    layout (``Path``) or why there is none (``Failure``); and its ``plans.jsonl`` fields besides
    ``index`` and ``example_id``."""

    index: int
    example_id: str
    candidates: Mapping[str, str | Path | Failure]
    plan: Mapping[str, Any]


def _jsonl_bytes(rows: Sequence[Mapping[str, Any]]) -> bytes:
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    return text.encode("utf-8")


def _clear(job_dir: Path) -> None:
    manifest = job_dir / MANIFEST
    if manifest.exists():
        manifest.unlink()  # from here on the directory is not complete
    for modality in MODALITIES:
        shutil.rmtree(job_dir / modality, ignore_errors=True)


def _write_candidate(job_dir: Path, index: int, modality: str, value: str | Path) -> str:
    rel = candidate_path(index, modality)
    if isinstance(value, Path):
        link_or_copy(value, job_dir / rel)
    else:
        atomic_write_bytes(job_dir / rel, value.encode("utf-8"))
    return rel


def _missing_line(missing: MissingOutput) -> str:
    failure = missing.failure
    return f"{missing.index}\t{missing.modality}\t{failure.category}\t{failure.describe()}\n"


def missing_counts(missing: Sequence[MissingOutput]) -> dict[str, int]:
    """Missing outputs per modality (every modality, zero included)."""
    counts = dict.fromkeys(MODALITIES, 0)
    for m in missing:
        counts[m.modality] += 1
    return counts


def _stats_bytes(
    components: Mapping[str, Mapping[str, Any]], missing: Sequence[MissingOutput]
) -> bytes:
    by_category: dict[str, dict[str, int]] = {m: {} for m in MODALITIES}
    for m in missing:
        counts = by_category[m.modality]
        counts[m.category] = counts.get(m.category, 0) + 1
    stats = {
        "components": {k: dict(v) for k, v in sorted(components.items())},
        "missing": by_category,
    }
    return (json.dumps(stats, indent=2) + "\n").encode()


def write_job_dir(
    job_dir: Path,
    examples: Sequence[ExampleOutputs],
    components: Mapping[str, Mapping[str, Any]],
) -> list[MissingOutput]:
    """Write everything but the manifest: the candidate layout (replacing an earlier one),
    ``records.jsonl``, ``plans.jsonl``, ``missing.txt`` and ``stats.json`` (``components``:
    per component key its call counts).  Returns the missing outputs, in ``missing.txt``'s order.
    An earlier manifest is removed first: until :func:`write_manifest`, the directory reads as
    incomplete."""
    _clear(job_dir)
    records: list[dict[str, Any]] = []
    plans: list[dict[str, Any]] = []
    missing: list[MissingOutput] = []
    for ex in examples:
        row: dict[str, Any] = {"index": ex.index, "example_id": ex.example_id}
        for modality in MODALITIES:
            value = ex.candidates[modality]
            if isinstance(value, Failure):
                row[modality] = {"status": "failure", **value.to_dict()}
                missing.append(MissingOutput(ex.index, ex.example_id, modality, value))
            else:
                rel = _write_candidate(job_dir, ex.index, modality, value)
                row[modality] = {"status": "ok", "path": rel}
        records.append(row)
        plans.append({"index": ex.index, "example_id": ex.example_id, **ex.plan})
    atomic_write_bytes(job_dir / RECORDS, _jsonl_bytes(records))
    atomic_write_bytes(job_dir / PLANS, _jsonl_bytes(plans))
    atomic_write_bytes(job_dir / MISSING, "".join(map(_missing_line, missing)).encode("utf-8"))
    atomic_write_bytes(job_dir / STATS, _stats_bytes(components, missing))
    return missing


def write_manifest(job_dir: Path, manifest: Mapping[str, Any]) -> Path:
    """Write ``manifest.json``, the mark of a complete directory (the caller redacts secrets)."""
    path = job_dir / MANIFEST
    text = json.dumps(dict(manifest), indent=2, ensure_ascii=False, default=str) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))
    return path


# -- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobDir:
    """One job directory as read back.

    ``records`` and ``plans`` are keyed by dataset row index; ``indices`` maps an example id to
    its index.  ``candidates`` holds, per index and modality, the candidate files present, except
    those ``records.jsonl`` says failed: a stale file never stands for a failed output."""

    path: Path
    system_id: str
    manifest: dict[str, Any]
    records: dict[int, dict[str, Any]]
    plans: dict[int, dict[str, Any]]
    stats: dict[str, Any]
    candidates: dict[int, dict[str, Path]]
    missing: tuple[MissingOutput, ...]
    indices: dict[str, int]

    @property
    def complete(self) -> bool:
        """Written to the end (the evaluation scores only complete directories)."""
        return self.manifest.get("status") == "complete"

    @property
    def oracle(self) -> bool:
        return bool(self.manifest.get("oracle", False))

    def index_of(self, example_id: str) -> int | None:
        return self.indices.get(example_id)

    def candidate(self, index: int, modality: str) -> Path | None:
        return self.candidates.get(index, {}).get(modality)

    def text(self, index: int) -> str | None:
        """The narration of one example, or None when there is none."""
        path = self.candidate(index, "text")
        return path.read_text(encoding="utf-8") if path is not None else None

    def plan(self, index: int) -> dict[str, Any] | None:
        """The parsed plan of one example (None: no plan, or it failed)."""
        return (self.plans.get(index) or {}).get("plan")


def _json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise JobDirError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise JobDirError(f"{path}: expected a JSON object")
    return data


def _jsonl_by_index(path: Path) -> dict[int, dict[str, Any]]:
    """The objects of a ``.jsonl`` file by their ``index`` (each must have an ``example_id``)."""
    if not path.is_file():
        return {}
    out: dict[int, dict[str, Any]] = {}
    with open(path, encoding="utf-8") as fh:
        for line, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise JobDirError(f"{path}:{line}: not valid JSON: {exc}") from exc
            if not isinstance(data, dict):
                raise JobDirError(f"{path}:{line}: expected a JSON object")
            for key in ("index", "example_id"):
                if key not in data:
                    raise JobDirError(f"{path}:{line}: record lacks field {key!r}")
            index = data["index"]
            if not isinstance(index, int) or isinstance(index, bool):
                raise JobDirError(f"{path}:{line}: field 'index' must be an integer")
            out[index] = data
    return out


def _row_index(name: str) -> int | None:
    """The index a layout folder name stands for (as the writer spells it), or None."""
    return int(name) if name.isascii() and name.isdigit() and str(int(name)) == name else None


def _failed(record: Mapping[str, Any] | None, modality: str) -> bool:
    entry = (record or {}).get(modality)
    return isinstance(entry, dict) and entry.get("status") == "failure"


def _candidates(path: Path, records: Mapping[int, Mapping[str, Any]]) -> dict[int, dict[str, Path]]:
    found: dict[int, dict[str, Path]] = {}
    for modality in MODALITIES:
        folder = path / modality
        if not folder.is_dir():
            continue
        for child in folder.iterdir():
            index = _row_index(child.name)
            if index is None or _failed(records.get(index), modality):
                continue
            file = child / CANDIDATE_FILES[modality]
            if file.is_file():
                found.setdefault(index, {})[modality] = file
    return {i: {m: found[i][m] for m in MODALITIES if m in found[i]} for i in sorted(found)}


def _missing(records: Mapping[int, Mapping[str, Any]]) -> tuple[MissingOutput, ...]:
    return tuple(
        MissingOutput(index, str(record["example_id"]), modality, _failure(record[modality]))
        for index, record in records.items()
        for modality in MODALITIES
        if _failed(record, modality)
    )


def _failure(entry: Mapping[str, Any]) -> Failure:
    # a hand-made record may lack the category; the writer always gives one
    return Failure.from_dict({**entry, "category": entry.get("category") or "unspecified"})


def _indices(
    records: Mapping[int, Mapping[str, Any]], plans: Mapping[int, Mapping[str, Any]]
) -> dict[str, int]:
    indices = {str(p["example_id"]): i for i, p in plans.items()}
    indices.update({str(r["example_id"]): i for i, r in records.items()})
    return indices


def read_job_dir(path: Path) -> JobDir:
    """Read one job directory (it must hold ``manifest.json``)."""
    manifest_path = path / MANIFEST
    manifest = _json_object(manifest_path)
    system_id = manifest.get("system_id", path.name)
    if not isinstance(system_id, str) or not system_id:
        raise JobDirError(f"{manifest_path}: field 'system_id' must be a non-empty string")
    records = _jsonl_by_index(path / RECORDS)
    plans = _jsonl_by_index(path / PLANS)
    stats = _json_object(path / STATS) if (path / STATS).is_file() else {}
    return JobDir(
        path=path,
        system_id=system_id,
        manifest=manifest,
        records=records,
        plans=plans,
        stats=stats,
        candidates=_candidates(path, records),
        missing=_missing(records),
        indices=_indices(records, plans),
    )


def discover_job_dirs(sweep_or_run_dir: Path) -> list[JobDir]:
    """The directory itself when it is a job directory (holds ``manifest.json``), else every
    child that is one, in path order; none when it does not exist.  Two directories claiming one
    system id raise :class:`JobDirError` (their scores would mix)."""
    root = Path(sweep_or_run_dir)
    if (root / MANIFEST).is_file():
        paths = [root]
    elif root.is_dir():
        paths = sorted(child for child in root.iterdir() if (child / MANIFEST).is_file())
    else:
        paths = []
    jobs: dict[str, JobDir] = {}
    for path in paths:
        job = read_job_dir(path)
        if job.system_id in jobs:
            raise JobDirError(
                f"{path / MANIFEST}: system_id {job.system_id!r} also used by "
                f"{jobs[job.system_id].path}"
            )
        jobs[job.system_id] = job
    return list(jobs.values())
