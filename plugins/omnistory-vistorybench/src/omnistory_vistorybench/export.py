"""Our scored runs in the official ViStoryBench formats: ``python -m omnistory_core export --task
vistorybench RUN_DIR --out DIR`` (the task's ``export``).

What it writes into ``DIR``, from ``RUN_DIR``'s ``scores.jsonl`` (what ``evaluate`` scored; the
runs are those of ``systems.json``, else of the job directories)::

    bench_results/<method>/<mode>/<lang>/<timestamp>/
        metadata.json                         {"run": {method, mode, language, dataset_name, ...}}
        summary.json                          per metric: scores.json, else the story means
        metrics/<evaluator>/story_results.json  per story: {"run", "metric", "scope", "status",
                                                 "metrics": {key: value}}
        metrics/<evaluator>/items.jsonl       per shot and criterion (prompt alignment)
        metrics/<evaluator>/scores.json       dataset-level values (the Inception Score)
    bench_results_full.csv, bench_results_lite.csv
    outputs/<method>/<mode>/<lang>/<timestamp>/<story>/shots/...   the runs' images (job
                                                 directories only; hard links where possible)

As ``result_management/manager.py`` and ``utils/export_bench_results_csv.py`` lay them out: a
story's value is the official one (the mean of its scored shots; only stories with a value are
listed, as the official driver skips the others); the CSVs hold one row per run ranked on the
split, columns ``method, model, mode, timestamp`` (``model`` is the mode and ``mode`` the
language, as the official files have them) and ``metrics.<evaluator>.metrics.<key>`` sorted, the
story means restricted to the split's stories, and the Inception Score computed over the split's
images (a full run's lite row takes its ``lite`` run row, as
``utils/add_inception_score_to_result_csv.py`` recomputes it).  A run is in the CSV of its own
split, and a full run also in the lite CSV.  The official leaderboard computed from these CSVs is
the report's (official policy, without the published rows): a test holds them equal.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omnistory_core.api import UserError
from omnistory_vistorybench import aggregation as agg

FRONT: tuple[str, ...] = ("method", "model", "mode", "timestamp")
DATASET_NAME = "ViStory"
SPLITS: tuple[str, ...] = ("full", "lite")


class ExportError(UserError):
    """A run directory that cannot be exported (one line naming it)."""


def export_runs(
    run_dir: str | Path, out_dir: str | Path, options: Mapping[str, Any] | None = None
) -> Path:
    """Export ``run_dir``'s scored runs into ``out_dir`` (module docstring); returns it.
    ``options``: ``outputs`` (True: copy the job directories' images too)."""
    from omnistory_vistorybench.report import discover_runs, read_score_lines

    run_dir, out = Path(run_dir), Path(out_dir)
    scores = run_dir / "scores.jsonl"
    if not scores.is_file():
        raise ExportError(
            f"{scores} does not exist: score the runs first (python -m omnistory_core evaluate"
            f" {run_dir})"
        )
    if out.resolve() == run_dir.resolve() or run_dir.resolve() in out.resolve().parents:
        raise ExportError(f"--out {out}: choose a folder outside {run_dir}")
    lines = read_score_lines(scores)
    if not lines:
        raise ExportError(f"{scores} has no scored row")
    jobs = discover_runs(run_dir) if _has_jobs(run_dir) else {}
    infos = agg.run_infos([line.system for line in lines], agg.recorded_systems(run_dir), jobs)
    values = agg.story_values(lines, infos)
    evaluators = {(line.system, line.metric): line.evaluator for line in lines}
    results = out / "bench_results"
    rows: dict[str, list[dict[str, Any]]] = {split: [] for split in SPLITS}
    for system, info in infos.items():
        part = values[values["system"] == system]
        run_root = results / info.method / info.mode / info.language / info.timestamp
        stories = write_run(run_root, info, part, evaluators, lines)
        for split, ids in agg.run_splits(info).items():
            if split in rows:
                rows[split].append(csv_row(info, part, stories, split, ids, evaluators))
    for split in SPLITS:
        write_csv(out / f"bench_results_{split}.csv", rows[split])
    if (options or {}).get("outputs", True):
        copy_outputs(jobs, out / "outputs")
    return out


def _has_jobs(run_dir: Path) -> bool:
    return (run_dir / "manifest.json").is_file() or any(run_dir.glob("*/manifest.json"))


def _run_block(info: agg.RunInfo) -> dict[str, Any]:
    return {
        "method": info.method,
        "mode": info.mode,
        "language": info.language,
        "dataset": DATASET_NAME,
        "timestamp": info.timestamp,
    }


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4, ensure_ascii=False) + "\n", encoding="utf-8")


def story_metrics(part: Any, evaluators: Mapping[tuple[str, str], str]) -> dict[str, dict]:
    """evaluator -> story id -> {key: value} of one run's ``ok`` story values (official)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    stories = part[(part["story_id"] != "") & (part["valid_status"] == "ok")]
    for row in stories.to_dict("records"):
        evaluator = evaluators[(row["system"], row["metric"])]
        metrics = out.setdefault(evaluator, {}).setdefault(str(row["story_id"]), {})
        metrics[str(row["metric"])] = float(row["valid"])
    return out


def run_values(part: Any, evaluators: Mapping[tuple[str, str], str], split: str) -> dict:
    """evaluator -> {key: value} of one run's dataset-level rows computed over ``split``
    (``""``: the whole run)."""
    out: dict[str, dict[str, float]] = {}
    rows = part[(part["story_id"] == "") & (part["split"] == split)]
    for row in rows.to_dict("records"):
        if row["valid_status"] == "ok" and not math.isnan(float(row["valid"])):
            evaluator = evaluators[(row["system"], row["metric"])]
            out.setdefault(evaluator, {})[str(row["metric"])] = float(row["valid"])
    return out


def write_run(
    root: Path,
    info: agg.RunInfo,
    part: Any,
    evaluators: Mapping[tuple[str, str], str],
    lines: Sequence[Any],
) -> dict[str, dict[str, dict[str, float]]]:
    """One run's ``bench_results`` folder; returns its story results (evaluator -> story ->
    metrics)."""
    block = _run_block(info)
    _write_json(root / "metadata.json", {"run": {**block, "outputs_timestamp": info.timestamp}})
    stories = story_metrics(part, evaluators)
    dataset = run_values(part, evaluators, "")
    summary: dict[str, Any] = {}
    for evaluator in sorted(set(stories) | set(dataset)):
        folder = root / "metrics" / evaluator
        folder.mkdir(parents=True, exist_ok=True)
        if evaluator in stories:
            results = {
                sid: {
                    "run": block,
                    "metric": {"name": evaluator},
                    "scope": {"level": "story", "story_id": sid},
                    "status": "complete",
                    "metrics": metrics,
                }
                for sid, metrics in sorted(stories[evaluator].items())
            }
            _write_json(folder / "story_results.json", results)
            summary[evaluator] = {"metrics": _means(stories[evaluator])}
        if evaluator in dataset:
            scores = {
                "metric": {"name": evaluator},
                "scope": {"level": "dataset"},
                "metrics": dataset[evaluator],
            }
            _write_json(folder / "scores.json", scores)
            summary[evaluator] = scores  # a dataset-level value wins, as officially
        items = [_item(line) for line in lines if _is_item_of(line, info.system, evaluator)]
        text = "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items)
        (folder / "items.jsonl").write_text(text, encoding="utf-8")
    _write_json(root / "summary.json", {"run": block, "metrics": summary})
    return stories


def _is_item_of(line: Any, system: str, evaluator: str) -> bool:
    return line.system == system and line.evaluator == evaluator and line.scope == "item"


def _item(line: Any) -> dict[str, Any]:
    story, _, shot = line.example_id.rpartition("_")
    return {
        "metric": {"name": line.evaluator, "submetric": line.metric},
        "scope": {
            "level": "item",
            "story_id": story,
            "shot_index": int(shot) if shot.isdigit() else shot,
        },
        "value": line.score,
        "status": "complete" if line.status == "ok" else line.status,
    }


def _means(stories: Mapping[str, Mapping[str, float]], allowed: set[str] | None = None) -> dict:
    """The official ``_aggregate_story_metrics_mean``: per key, the mean over the (allowed)
    stories that have it."""
    values: dict[str, list[float]] = {}
    for sid, metrics in stories.items():
        if allowed is not None and sid not in allowed:
            continue
        for key, value in metrics.items():
            values.setdefault(key, []).append(float(value))
    return {k: sum(v) / len(v) for k, v in values.items() if v}


def csv_row(
    info: agg.RunInfo,
    part: Any,
    stories: Mapping[str, Mapping[str, Mapping[str, float]]],
    split: str,
    ids: Sequence[str] | None,
    evaluators: Mapping[tuple[str, str], str],
) -> dict[str, Any]:
    """One run's row of ``bench_results_<split>.csv``."""
    allowed = set(ids) if ids is not None else None
    row: dict[str, Any] = {
        "method": info.method,
        "model": info.mode,
        "mode": info.language,
        "timestamp": info.timestamp,
    }
    for evaluator, by_story in stories.items():
        for key, value in _means(by_story, allowed).items():
            row[f"metrics.{evaluator}.metrics.{key}"] = value
    # the run's own split: its whole-run rows; another split (a full run's lite): the rows
    # computed over that split, else the whole run's (as the report ranks it)
    own = run_values(part, evaluators, "")
    if split != info.split:
        for evaluator, metrics in run_values(part, evaluators, split).items():
            own[evaluator] = {**own.get(evaluator, {}), **metrics}
    for evaluator, metrics in own.items():
        for key, value in metrics.items():
            row[f"metrics.{evaluator}.metrics.{key}"] = value
    return row


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """The official CSV: the front columns, then the metric columns sorted; UTF-8 with BOM."""
    keys = sorted({k for row in rows for k in row if k not in FRONT})
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8-sig") as fh:
        writer = csv.DictWriter(fh, fieldnames=[*FRONT, *keys])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in (*FRONT, *keys)})


def copy_outputs(jobs: Mapping[str, Any], target: Path) -> None:
    """Put each job directory's run folder into one official outputs tree (hard links when the
    filesystem allows, else copies)."""
    for job in jobs.values():
        source = job.path / "outputs" / job.method / job.mode / job.language / job.timestamp
        if not source.is_dir():
            continue
        dest = target / job.method / job.mode / job.language / job.timestamp
        shutil.copytree(source, dest, copy_function=_link_or_copy, dirs_exist_ok=True)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        if os.path.exists(dst):
            os.unlink(dst)
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


__all__ = ["ExportError", "csv_row", "export_runs", "write_csv", "write_run"]
