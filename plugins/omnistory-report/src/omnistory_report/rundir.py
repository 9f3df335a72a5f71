"""Read what a run leaves per system: manifest, per-example records, plans and candidate files.

Layout (one folder per system under the run directory)::

    RUN_DIR/<system>/manifest.json      system_id, oracle, paradigm, components, dataset, ...
    RUN_DIR/<system>/records.jsonl      {"index", "example_id", "text": {"status", ...}, ...}
    RUN_DIR/<system>/plans.jsonl        {"index", "example_id", "raw", "plan", "repairs", "failure"}
    RUN_DIR/<system>/stats.json         {"components": {"<kind>/<name>": {"calls", "cache_hits",
                                        "failures", "loads"}}, ...}
    RUN_DIR/<system>/text/<i>/generated.txt, image/<i>/generated.png, speech/<i>/generated.wav

Everything here tolerates a partial run (missing files, missing examples); malformed files raise
``ValueError`` naming the file, line and field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from omnistory_core.contract import MODALITIES

PARADIGMS: tuple[str, ...] = ("orchestration", "semi-orchestration", "any-to-any", "baseline")
CANDIDATE_FILES: dict[str, str] = {
    "text": "generated.txt",
    "image": "generated.png",
    "speech": "generated.wav",
}


def read_jsonl(path: Path, required: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """JSON objects of a .jsonl file; errors name the file, line and missing field."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"{path}:{line}: not valid JSON: {exc}") from exc
            if not isinstance(data, dict):
                raise ValueError(f"{path}:{line}: expected a JSON object")
            for key in required:
                if key not in data:
                    raise ValueError(f"{path}:{line}: record lacks field {key!r}")
            out.append(data)
    return out


@dataclass(frozen=True)
class SystemRun:
    """One system's folder of a run."""

    system_id: str
    path: Path
    manifest: dict[str, Any]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def oracle(self) -> bool:
        return bool(self.manifest.get("oracle", False))

    @property
    def paradigm(self) -> str:
        # the paper's tables group T+I and T+S under one semi-orchestration paradigm
        value = str(self.manifest.get("paradigm") or "").split(" (", 1)[0]
        return value if value in PARADIGMS else "unknown"

    def index_of(self, example_id: str) -> int | None:
        """Row index of an example (from records, then plans)."""
        for source in (self.records, self.plans):
            rec = source.get(example_id)
            if rec is not None and isinstance(rec.get("index"), int):
                return rec["index"]
        return None

    def candidate(self, modality: str, index: int | None) -> Path | None:
        """The official-layout candidate file, if it exists."""
        if index is None:
            return None
        path = self.path / modality / str(index) / CANDIDATE_FILES[modality]
        return path if path.is_file() else None

    def text(self, index: int | None) -> str | None:
        path = self.candidate("text", index)
        return path.read_text(encoding="utf-8") if path is not None else None


def read_system(path: Path) -> SystemRun:
    """Read one system folder (must hold manifest.json)."""
    manifest_path = path / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{manifest_path}: not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict):
        raise ValueError(f"{manifest_path}: expected a JSON object")
    system_id = manifest.get("system_id", path.name)
    if not isinstance(system_id, str) or not system_id:
        raise ValueError(f"{manifest_path}: field 'system_id' must be a non-empty string")
    records: dict[str, dict[str, Any]] = {}
    if (path / "records.jsonl").is_file():
        for rec in read_jsonl(path / "records.jsonl", ("index", "example_id")):
            records[str(rec["example_id"])] = rec
    plans: dict[str, dict[str, Any]] = {}
    if (path / "plans.jsonl").is_file():
        for rec in read_jsonl(path / "plans.jsonl", ("example_id",)):
            plans[str(rec["example_id"])] = rec
    stats: dict[str, Any] = {}
    if (path / "stats.json").is_file():
        try:
            stats = json.loads((path / "stats.json").read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"{path / 'stats.json'}: not valid JSON: {exc}") from exc
        if not isinstance(stats, dict):
            raise ValueError(f"{path / 'stats.json'}: expected a JSON object")
    return SystemRun(system_id, path, manifest, records, plans, stats)


def read_run_dir(run_dir: str | Path) -> dict[str, SystemRun]:
    """Every ``<system>/manifest.json`` under the run directory, keyed by system id."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory not found: {run_dir}")
    runs: dict[str, SystemRun] = {}
    for child in sorted(run_dir.iterdir()):
        if (child / "manifest.json").is_file():
            run = read_system(child)
            if run.system_id in runs:
                raise ValueError(
                    f"{child / 'manifest.json'}: system_id {run.system_id!r} also used by "
                    f"{runs[run.system_id].path}"
                )
            runs[run.system_id] = run
    return runs


def system_info(runs: dict[str, SystemRun], systems: list[str] | tuple[str, ...]) -> pd.DataFrame:
    """Paradigm and oracle flag per system (unknown / False for systems without a folder)."""
    rows = []
    for s in systems:
        run = runs.get(s)
        rows.append(
            {
                "system": s,
                "paradigm": run.paradigm if run else "unknown",
                "oracle": run.oracle if run else False,
            }
        )
    return pd.DataFrame(rows, columns=["system", "paradigm", "oracle"]).set_index("system")


def failures_frame(runs: dict[str, SystemRun]) -> pd.DataFrame:
    """One row per failed output: system, example_id, modality, category."""
    rows = []
    for sid, run in runs.items():
        for example_id, rec in run.records.items():
            for modality in MODALITIES:
                entry = rec.get(modality)
                if isinstance(entry, dict) and entry.get("status") == "failure":
                    rows.append(
                        {
                            "system": sid,
                            "example_id": example_id,
                            "modality": modality,
                            "category": str(entry.get("category") or "unspecified"),
                        }
                    )
    return pd.DataFrame(rows, columns=["system", "example_id", "modality", "category"])


def lengths_frame(runs: dict[str, SystemRun]) -> pd.DataFrame:
    """Generated narration length (trimmed Unicode characters) per available text candidate."""
    from omnistory_report.analysis.length import narration_length

    rows = []
    for sid, run in runs.items():
        for example_id, rec in run.records.items():
            text = run.text(rec.get("index"))
            if text is not None:
                rows.append(
                    {"system": sid, "example_id": example_id, "length": narration_length(text)}
                )
    return pd.DataFrame(rows, columns=["system", "example_id", "length"])


def outputs_frame(runs: dict[str, SystemRun]) -> pd.DataFrame:
    """Per system and modality: examples with a record, outputs written, failed outputs and their
    categories (``"plan_json_error ×2, empty_output ×1"``)."""
    rows = []
    for sid, run in runs.items():
        for modality in MODALITIES:
            written = failed = 0
            categories: dict[str, int] = {}
            for rec in run.records.values():
                entry = rec.get(modality)
                if not isinstance(entry, dict):
                    continue
                if entry.get("status") == "ok":
                    written += 1
                elif entry.get("status") == "failure":
                    failed += 1
                    cat = str(entry.get("category") or "unspecified")
                    categories[cat] = categories.get(cat, 0) + 1
            rows.append(
                {
                    "system": sid,
                    "modality": modality,
                    "examples": len(run.records),
                    "written": written,
                    "failed": failed,
                    "failure categories": ", ".join(
                        f"{c} ×{n}" for c, n in sorted(categories.items(), key=lambda x: -x[1])
                    ),
                }
            )
    columns = ["system", "modality", "examples", "written", "failed", "failure categories"]
    return pd.DataFrame(rows, columns=columns)


def calls_frame(runs: dict[str, SystemRun]) -> pd.DataFrame:
    """Per system and component (``stats.json``): calls, store cache hits, failures, model loads."""
    rows = []
    for sid, run in runs.items():
        components = run.stats.get("components")
        if not isinstance(components, dict):
            continue
        for name, counts in sorted(components.items()):
            if not isinstance(counts, dict):
                continue
            rows.append(
                {
                    "system": sid,
                    "component": str(name),
                    **{k: int(counts.get(k) or 0) for k in _CALL_COUNTS},
                }
            )
    return pd.DataFrame(rows, columns=["system", "component", *_CALL_COUNTS])


_CALL_COUNTS = ("calls", "cache_hits", "failures", "loads")
