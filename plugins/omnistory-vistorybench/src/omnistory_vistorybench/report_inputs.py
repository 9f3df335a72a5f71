"""What the ViStoryBench report reads: the scores table (``scores.jsonl``), the jobs of a run
directory (their manifests and records), published leaderboard CSVs, and the failures counted by
category.  Each bad line or file is a :class:`ReportError` naming it.

Below :mod:`omnistory_vistorybench.report` (which builds the report) and
:mod:`omnistory_vistorybench.report_html` (which renders its page); :mod:`.export` reads runs
and scores through it too.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from omnistory_core.api import SCOPES, STATUSES, UserError
from omnistory_vistorybench import aggregation as agg
from omnistory_vistorybench import bench_csv

log = logging.getLogger("omnistory")

MANIFEST = "manifest.json"
RECORDS = "records.jsonl"
#: the mode a job without a manifest is taken to have run in (generate's default)
DEFAULT_MODE = "base"
_SCORE_FIELDS = ("system", "example_id", "evaluator", "criterion", "score", "status")
_SCORED_KINDS = ("metric", "judge")


class ReportError(UserError):
    """Input the report cannot read (a scores row, a CSV, a manifest): one line naming it."""


# ----------------------------------------------------------------------------------------------
# inputs


@dataclass(frozen=True)
class ScoreLine:
    """One scored row of ``scores.jsonl``, as much of it as the report reads."""

    system: str
    example_id: str
    scope: str
    evaluator: str
    metric: str
    score: float | None
    status: str
    line: int
    kind: str = "metric"


@dataclass
class JobRun:
    """One job directory of the run: where its run lies in the official layout.  ``system`` is
    the run's label in the scores (``<method>/<mode>/<lang>/<timestamp>``)."""

    path: Path
    system: str
    method: str
    mode: str
    language: str
    timestamp: str
    split: str
    story_ids: list[str] | None
    dataset: Mapping[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)

    def info(self) -> agg.RunInfo:
        ids = tuple(self.story_ids) if self.story_ids is not None else None
        return agg.RunInfo(
            self.system, self.method, self.mode, self.language, self.timestamp, self.split, ids
        )


def read_score_lines(path: Path) -> list[ScoreLine]:
    """The metric and judge rows of a scores file (human ratings are not ranked); a malformed
    line raises :class:`ReportError` naming the file, the line and the field."""
    out: list[ScoreLine] = []
    seen: dict[tuple[str, str, str, str], int] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, 1):
            if not text.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ReportError(f"{where}: not a JSON object ({exc.msg})") from None
            if not isinstance(data, dict):
                raise ReportError(f"{where}: not a JSON object")
            missing = [k for k in _SCORE_FIELDS if k not in data]
            if missing:
                raise ReportError(f"{where}: field {missing[0]!r} is missing")
            if data.get("kind", "metric") not in _SCORED_KINDS:
                continue
            row = _score_line(where, lineno, data)
            key = (row.system, row.scope, row.example_id, row.metric)
            if key in seen:
                raise ReportError(
                    f"{where}: field 'criterion': {row.metric!r} of {row.system!r} on"
                    f" {row.example_id!r} ({row.scope}) repeats line {seen[key]}"
                )
            seen[key] = lineno
            out.append(row)
    return out


def _score_line(where: str, lineno: int, data: Mapping[str, Any]) -> ScoreLine:
    scope = str(data.get("scope", "item"))
    if scope not in SCOPES:
        raise ReportError(f"{where}: field 'scope': {scope!r} is not one of {SCOPES}")
    status = data["status"]
    if status not in STATUSES:
        raise ReportError(f"{where}: field 'status': {status!r} is not one of {STATUSES}")
    score = data["score"]
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
        raise ReportError(f"{where}: field 'score': {score!r} is not a number")
    if status == "ok" and (score is None or not math.isfinite(score)):
        raise ReportError(f"{where}: field 'score': status 'ok' needs a finite score")
    for name in ("system", "criterion"):
        if not isinstance(data[name], str) or not data[name].strip():
            raise ReportError(f"{where}: field {name!r} is empty")
    example = str(data["example_id"] or "")
    if scope != "run" and not example:
        raise ReportError(f"{where}: field 'example_id' is empty on a {scope} row")
    return ScoreLine(
        system=str(data["system"]).strip(),
        example_id=example.strip(),
        scope=scope,
        evaluator=str(data["evaluator"]),
        metric=str(data["criterion"]).strip(),
        score=float(score) if status == "ok" and score is not None else None,
        status=status,
        line=lineno,
        kind=str(data.get("kind", "metric")),
    )


def discover_runs(run_dir: Path | None) -> dict[str, JobRun]:
    """The ViStoryBench job directories of ``run_dir`` (itself, else its children holding a
    ``manifest.json``), by run label; other tasks' jobs are skipped."""
    if run_dir is None:
        return {}
    if (run_dir / MANIFEST).is_file():
        paths = [run_dir]
    elif run_dir.is_dir():
        paths = sorted(c for c in run_dir.iterdir() if (c / MANIFEST).is_file())
    else:
        raise ReportError(f"--run-dir {run_dir} does not exist")
    runs: dict[str, JobRun] = {}
    for path in paths:
        job = read_job(path)
        if job is None:
            continue
        if job.system in runs:
            raise ReportError(
                f"{path / MANIFEST}: run {job.system!r} (method/mode/lang/timestamp) is also the"
                f" run of {runs[job.system].path}"
            )
        runs[job.system] = job
    return runs


def read_job(path: Path) -> JobRun | None:
    """One job directory, or None when its manifest is another task's."""
    manifest_path = path / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ReportError(f"{manifest_path}: unreadable manifest ({exc})") from None
    task = manifest.get("task") if isinstance(manifest, dict) else None
    if not isinstance(task, dict) or task.get("name") != "vistorybench":
        return None
    system = manifest.get("system_id")
    if not isinstance(system, str) or not system:
        raise ReportError(f"{manifest_path}: field 'system_id' is missing")
    where = manifest.get("layout") or {}
    data = manifest.get("dataset") or {}
    ids = data.get("story_ids")
    method = str(where.get("method") or system)
    mode = str(where.get("mode") or DEFAULT_MODE)
    language = str(where.get("language") or data.get("language") or "en")
    timestamp = str(where.get("timestamp") or "")
    job = JobRun(
        path=path,
        system="/".join((method, mode, language, timestamp)),
        method=method,
        mode=mode,
        language=language,
        timestamp=timestamp,
        split=str(data.get("split") or "full"),
        story_ids=[str(s) for s in ids] if isinstance(ids, list) else None,
        dataset=data,
    )
    job.records = _read_records(path / RECORDS)
    return job


def _read_records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for lineno, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ReportError(f"{path}:{lineno}: not a JSON object ({exc.msg})") from None
        if not isinstance(row, dict) or "story_id" not in row or "shot_index" not in row:
            raise ReportError(f"{path}:{lineno}: a shot record needs story_id and shot_index")
        rows.append(row)
    return rows


def read_published(paths: Sequence[str | Path]) -> pd.DataFrame | None:
    """The official bench_results CSVs as one run table (their split from the file name)."""
    if not paths:
        return None
    frames = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise ReportError(f"--bench-results-csv {path}: no such file")
        try:
            frames.append(bench_csv.read_bench_results_csv(path))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ReportError(
                str(exc) if isinstance(exc, ValueError) else f"{path}: {exc}"
            ) from None
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------------------------
# failures


def failure_counts(lines: Sequence[ScoreLine]) -> pd.DataFrame:
    """Per system, evaluator, metric and scope: how many rows have each status."""
    counts: dict[tuple[str, str, str, str], dict[str, int]] = {}
    for line in lines:
        key = (line.system, line.evaluator, line.metric, line.scope)
        row = counts.setdefault(key, dict.fromkeys(STATUSES, 0))
        row[line.status] += 1
    rows = [
        {
            "system": k[0],
            "evaluator": k[1],
            "metric": k[2],
            "scope": k[3],
            **v,
            "failed": v["missing_output"] + v["invalid"] + v["error"],
        }
        for k, v in counts.items()
    ]
    columns = ["system", "evaluator", "metric", "scope", *STATUSES, "failed"]
    return pd.DataFrame(rows, columns=columns)


__all__ = [
    "JobRun",
    "ReportError",
    "ScoreLine",
    "discover_runs",
    "failure_counts",
    "read_job",
    "read_published",
    "read_score_lines",
]
