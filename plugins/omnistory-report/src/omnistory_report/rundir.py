"""What a run leaves per system, as the report reads it: by example id.

One folder per system under the run directory, in the job-directory format
(:mod:`omnistory_core.jobdir`, whose reader does the reading): ``manifest.json`` (system_id,
oracle, paradigm, components, dataset, ...), ``records.jsonl``, ``plans.jsonl``, ``stats.json``
and the candidates ``text/<i>/generated.txt``, ``image/<i>/generated.png`` and
``speech/<i>/generated.wav``.

Everything here tolerates a partial run (missing files, missing examples); malformed files raise
``ValueError`` naming the file, line and field.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from omnistory_core.contract import MODALITIES
from omnistory_core.jobdir import CANDIDATE_FILES, JobDir, discover_job_dirs

__all__ = [
    "CANDIDATE_FILES",
    "PARADIGMS",
    "SystemRun",
    "calls_frame",
    "failures_frame",
    "lengths_frame",
    "outputs_frame",
    "read_run_dir",
    "system_info",
]

PARADIGMS: tuple[str, ...] = ("orchestration", "semi-orchestration", "any-to-any", "baseline")


@dataclass(frozen=True)
class SystemRun:
    """One system's folder of a run: its job directory, keyed by example id where the scores
    table is."""

    job: JobDir

    @property
    def system_id(self) -> str:
        return self.job.system_id

    @property
    def path(self) -> Path:
        return self.job.path

    @property
    def manifest(self) -> dict[str, Any]:
        return self.job.manifest

    @property
    def stats(self) -> dict[str, Any]:
        return self.job.stats

    @cached_property
    def records(self) -> dict[str, dict[str, Any]]:
        return {str(r["example_id"]): r for r in self.job.records.values()}

    @cached_property
    def plans(self) -> dict[str, dict[str, Any]]:
        return {str(p["example_id"]): p for p in self.job.plans.values()}

    @property
    def oracle(self) -> bool:
        return self.job.oracle

    @property
    def paradigm(self) -> str:
        # the paper's tables group T+I and T+S under one semi-orchestration paradigm
        value = str(self.manifest.get("paradigm") or "").split(" (", 1)[0]
        return value if value in PARADIGMS else "unknown"

    def index_of(self, example_id: str) -> int | None:
        """Row index of an example (from records, then plans)."""
        return self.job.index_of(example_id)

    def candidate(self, modality: str, index: int | None) -> Path | None:
        """The official-layout candidate file, if it exists."""
        return self.job.candidate(index, modality) if index is not None else None

    def text(self, index: int | None) -> str | None:
        return self.job.text(index) if index is not None else None


def read_run_dir(run_dir: str | Path) -> dict[str, SystemRun]:
    """Every ``<system>/manifest.json`` under the run directory, keyed by system id."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory not found: {run_dir}")
    return {job.system_id: SystemRun(job) for job in discover_job_dirs(run_dir)}


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
    rows = [
        {"system": sid, "example_id": m.example_id, "modality": m.modality, "category": m.category}
        for sid, run in runs.items()
        for m in run.job.missing
    ]
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
