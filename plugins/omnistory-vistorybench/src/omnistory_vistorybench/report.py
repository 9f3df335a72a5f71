"""ViStoryBench's report: the official rank-based leaderboard and an HTML page of story strips.

:func:`build_report` is the task's ``report`` (``python -m omnistory_core report --task
vistorybench`` and the end of a ViStoryBench sweep call it).  Its inputs, any of which may be
absent:

* ``scores``: a ``scores.jsonl`` (the core's scores contract).  Item rows are shots
  (``example_id`` = ``"<story>_<NN>"``), averaged per story as the official evaluators do; group
  rows are story values (``example_id`` = the story); run rows are dataset-level values (the
  Inception Score) of the split their ``example_id`` names: ``""`` the whole run, ranked on the
  run's own split, ``"lite"`` its lite stories only (the evaluation scores both for a full run),
  ranked on the lite split.  ``criterion`` is the official story-level key
  (``cids_self_mean``, ``scene``, ...), ``system`` the run (``<method>/<mode>/<lang>/<ts>``).
* ``run_dir``: a sweep directory (its job directories) or one job directory: the manifests give
  each run's mode, language, timestamp, split and stories, the records and images the strips;
  where no manifest says it (an ``--outputs`` tree), the evaluation's ``systems.json`` does.
* ``options["bench_results_csv"]``: official ``bench_results*.csv`` files; their runs are ranked
  beside ours and marked ``published``; ``options["published"]`` (default True): the shipped
  published tables (:mod:`omnistory_vistorybench.published`) too, once our runs are scored.

The aggregation (story values, run tables, the leaderboards) is
:mod:`omnistory_vistorybench.aggregation`; each of our rows' ``metric_settings`` comes from
:mod:`omnistory_vistorybench.comparability`.

What it writes into ``out_dir``::

    leaderboard.csv                 the official leaderboard, every split (official policy),
                                    ours among the published with ``source`` and
                                    ``metric_settings``
    leaderboard_<split>.csv         the same, one split (lite, full)
    leaderboard_valid_only.csv      ours under the valid-only policy (when scores are given)
    leaderboard_zero_filled.csv     ours under the zero-filled policy (when scores are given)
    run_means_<policy>.csv          the run tables ranked (the official bench_results columns
                                    by their short keys), published rows included
    story_values.csv                our story values per policy, with their status
    failures.csv                    per system and metric: rows by status and scope
    index.html, assets/             the page and its thumbnails (self-contained)

Policies (the task's ``aggregation.policies``):

* ``official``: as the official summary: a story's value is the mean of its scored shots, a run's
  the mean of its scored stories, a dataset-level value wins over the story mean;
* ``valid_only``: the same means over ``ok`` rows only, no dataset-level override;
* ``zero_filled``: a shot or story without a value (``missing_output``, ``invalid``, no row at
  all) counts 0; an ``error`` row (the evaluator could not run) is left out under every policy.

A full-split run is also ranked on the lite split (its lite stories), with the run-level values
computed over its lite images (its run rows with ``example_id`` ``"lite"``), as the official
recomputes the Inception Score per subset (``utils/add_inception_score_to_result_csv.py``).
Each split of a run takes the run row of a metric computed over that split, else the whole
run's (``""``).  That fallback (scores written before a full run had a ``"lite"`` row) departs
from the official; the page names each run, metric and split it applies to.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from omnistory_core.api import SCOPES, STATUSES, DatasetError, UserError
from omnistory_vistorybench import aggregation as agg
from omnistory_vistorybench import dataset as vistory
from omnistory_vistorybench import leaderboard as lb

log = logging.getLogger("omnistory")

POLICIES: tuple[str, ...] = agg.POLICIES
#: ``roster`` option: ``official`` ranks the published methods of the official roster only (as
#: ``summarize_leaderboard.py`` does), ``all`` ranks every published method; ours always rank
ROSTERS: tuple[str, ...] = ("official", "all")
OPTIONS: dict[str, Any] = {
    "bench_results_csv": (),
    "html": True,
    "roster": "official",
    "thumbnail": 320,
    "faithful": True,
    "published": True,
}
MANIFEST = "manifest.json"
RECORDS = "records.jsonl"
ASSETS = "assets"
PUBLISHED = "published"
OURS = "ours"
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
            frames.append(lb.read_bench_results_csv(path))
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


# ----------------------------------------------------------------------------------------------
# build


def build_report(
    out_dir: str | Path,
    *,
    scores: str | Path | None = None,
    run_dir: str | Path | None = None,
    options: Mapping[str, Any] | None = None,
) -> Path:
    """Build the ViStoryBench report into ``out_dir`` (module docstring) and return it.

    ``scores`` that does not exist yet is allowed (a sweep without evaluation): the leaderboard
    then says no scores yet and the page shows the strips.  Options: ``bench_results_csv`` (paths
    of official bench_results CSVs, ranked beside ours), ``html`` (True), ``roster``
    (``official``: the published methods of the official roster only; ``all``), ``thumbnail``
    (the long side of the copied images in pixels, 320; 0 copies the files as they are),
    ``faithful`` (True: the official Prompt Align Avg, see
    :func:`leaderboard.prompt_align_avg`).  Bad input raises :class:`ReportError`.
    """
    opts = _options(options)
    out = Path(out_dir)
    runs = discover_runs(Path(run_dir) if run_dir is not None else None)
    scores_path = Path(scores) if scores is not None else None
    lines = read_score_lines(scores_path) if scores_path and scores_path.is_file() else None
    published = read_published(opts["bench_results_csv"])
    if lines is None and published is None and not runs:
        raise ReportError(
            "nothing to report: give --scores, --run-dir or --bench-results-csv"
            + (f" ({scores_path} does not exist)" if scores_path else "")
        )
    if opts["published"] and lines:
        # where our methods land among the published ones (the shipped official tables)
        from omnistory_vistorybench.published import published_runs

        shipped = published_runs()
        published = shipped if published is None else pd.concat([published, shipped])
    out.mkdir(parents=True, exist_ok=True)
    ours, means, values = None, pd.DataFrame(), None
    split_notes: list[str] = []
    folders = [p for p in (scores_path.parent if scores_path else None, run_dir) if p]
    infos: dict[str, agg.RunInfo] = {}
    if lines:
        recorded = agg.recorded_systems(*(Path(f) for f in folders))
        infos = agg.run_infos([line.system for line in lines], recorded, runs)
        values = agg.story_values(lines, infos)
        ours, means = agg.our_run_tables(values, infos, split_notes)
    boards, renamed = agg.leaderboards(ours, published, opts["roster"], bool(opts["faithful"]))
    if lines:
        settings_column(boards, infos, renamed, lines, [Path(f) for f in folders])
    _write_tables(out, boards, ours, published, means, values, lines)
    if opts["html"]:
        # a rebuild must not show an earlier build's images
        shutil.rmtree(out / ASSETS, ignore_errors=True)
        page = Page(
            out_dir=out,
            boards=boards,
            failures=failure_counts(lines or []),
            runs=runs,
            scores_path=scores_path,
            scored=bool(lines),
            published=published is not None,
            left_out=agg.left_out(published, opts["roster"]),
            thumbnail=int(opts["thumbnail"]),
            run_dir=Path(run_dir) if run_dir is not None else None,
            split_notes=split_notes,
        )
        (out / "index.html").write_text(render(page), encoding="utf-8")
    return out


def settings_column(
    boards: Mapping[str, pd.DataFrame],
    infos: Mapping[str, agg.RunInfo],
    renamed: Mapping[str, str],
    lines: Sequence[ScoreLine],
    folders: Sequence[Path],
) -> None:
    """Add ``metric_settings`` to every board: for each of our rows, whether its runs were
    scored with the official metric settings (:mod:`omnistory_vistorybench.comparability`);
    ``published`` for the published rows."""
    from omnistory_vistorybench import comparability as cmp

    evaluators = cmp.read_evaluators(*folders)
    defaults = cmp.declared_defaults()
    used: dict[str, set[str]] = {}
    for line in lines:
        if line.status == "ok":
            used.setdefault(line.system, set()).add(f"{line.kind}/{line.evaluator}")
    ours = set(renamed.values()) or {i.method for i in infos.values()}
    for board in boards.values():
        column = []
        for row in board.to_dict("records"):
            name = str(row["model"])
            if name not in ours:
                column.append(cmp.PUBLISHED)
                continue
            systems = [
                s
                for s, i in infos.items()
                if renamed.get(i.method, i.method) == name
                and i.mode == row["mode"]
                and row["split"] in agg.run_splits(i)
            ]
            column.append(cmp.settings_of(systems, used, evaluators, defaults))
        board["metric_settings"] = column


def _options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    unknown = sorted(set(options or {}) - set(OPTIONS))
    if unknown:
        raise TypeError(f"vistorybench build_report got unknown options: {unknown}")
    opts = {**OPTIONS, **(options or {})}
    csvs = opts["bench_results_csv"] or ()
    opts["bench_results_csv"] = [csvs] if isinstance(csvs, (str, Path)) else list(csvs)
    if opts["roster"] not in ROSTERS:
        raise ReportError(f"roster must be one of {ROSTERS}, not {opts['roster']!r}")
    if int(opts["thumbnail"]) < 0:
        raise ReportError(f"thumbnail must be 0 or a size in pixels, not {opts['thumbnail']!r}")
    return opts


def _write_tables(
    out: Path,
    boards: Mapping[str, pd.DataFrame],
    ours: Mapping[str, pd.DataFrame] | None,
    published: pd.DataFrame | None,
    means: pd.DataFrame,
    values: pd.DataFrame | None,
    lines: Sequence[ScoreLine] | None,
) -> None:
    official = boards["official"]
    lb.write_leaderboard_csv(official, out / "leaderboard.csv")
    for split, part in official.groupby("split", sort=False):
        if split != lb.DEFAULT_SPLIT:
            lb.write_leaderboard_csv(part, out / f"leaderboard_{split}.csv")
    for policy in ("valid_only", "zero_filled"):
        if policy in boards:
            lb.write_leaderboard_csv(boards[policy], out / f"leaderboard_{policy}.csv")
    tables = dict(ours or {})
    if not tables and published is not None:
        tables = {"official": published}
    for policy, table in tables.items():
        rows = table if published is None or ours is None else pd.concat([published, table])
        lb.write_leaderboard_csv(rows, out / f"run_means_{policy}.csv")
    if values is not None:
        lb.write_leaderboard_csv(values, out / "story_values.csv")
        lb.write_leaderboard_csv(means, out / "means.csv")
    if lines is not None:
        lb.write_leaderboard_csv(failure_counts(lines), out / "failures.csv")


# ----------------------------------------------------------------------------------------------
# the page


@dataclass
class Page:
    """What the HTML page shows."""

    out_dir: Path
    boards: Mapping[str, pd.DataFrame]
    failures: pd.DataFrame
    runs: Mapping[str, JobRun]
    scores_path: Path | None
    scored: bool
    published: bool
    left_out: list[str]
    thumbnail: int
    run_dir: Path | None
    notes: list[str] = field(default_factory=list)
    #: where a split of a run took the whole run's run-level value (:func:`split_run_rows`)
    split_notes: list[str] = field(default_factory=list)


STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1d1d1f; margin: 0; }
header { background: #20232a; color: #fff; padding: 10px 20px; }
header h1 { font-size: 18px; margin: 0; }
header a { color: #9ecbff; margin-right: 14px; }
main { padding: 16px 20px 40px; }
h2 { margin-top: 28px; border-bottom: 1px solid #d9d9de; padding-bottom: 4px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 14px; }
th, td { border: 1px solid #d9d9de; padding: 3px 7px; text-align: right; }
th { background: #f5f5f7; } td.l, th.l { text-align: left; }
tr.published td { background: #f3f6fb; color: #3a4a63; }
.badge { border-radius: 4px; padding: 0 5px; font-size: 11px; font-weight: 600;
         background: #d6e6f5; margin-left: 4px; }
.note { color: #6b6b70; } .scroll { overflow-x: auto; }
.story { border: 1px solid #d9d9de; border-radius: 6px; padding: 10px; margin: 14px 0; }
.refs, .strip { display: flex; gap: 8px; overflow-x: auto; align-items: flex-start; }
.refs { padding-bottom: 8px; border-bottom: 1px dashed #d9d9de; margin-bottom: 8px; }
figure { margin: 0; flex: 0 0 auto; text-align: center; font-size: 12px; color: #6b6b70; }
figure img { display: block; max-height: 180px; max-width: 240px; background: #f5f5f7; }
.refs figure img { max-height: 120px; max-width: 160px; }
.system { margin: 6px 0 10px; } .system h4 { margin: 2px 0; font-size: 13px; }
.shot.missing { width: 160px; height: 120px; border: 2px dashed #b3261e; color: #b3261e;
                display: flex; align-items: center; justify-content: center; padding: 4px; }
"""


def render(page: Page) -> str:
    """The whole ``index.html``: leaderboards, failure counts, then the story strips."""
    strips = _strips_html(page)  # first: it copies the images and collects notes
    body = [
        "<header><h1>ViStoryBench report</h1>",
        '<a href="#leaderboard">leaderboard</a><a href="#failures">failures</a>',
        '<a href="#stories">stories</a></header><main>',
        _leaderboard_section(page),
        _failures_section(page),
        strips,
        "</main>",
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>ViStoryBench report</title>"
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )


_POLICY_TITLES = {
    "official": "Official policy (the official summary's means)",
    "valid_only": "Valid-only (means over scored shots and stories)",
    "zero_filled": "Zero-filled (every unscored shot or story counts 0)",
}


def _leaderboard_section(page: Page) -> str:
    parts = ['<section id="leaderboard"><h2>Leaderboard</h2>']
    if not page.scored:
        parts.append(f'<p class="note no-scores">{escape(_no_scores_note(page))}</p>')
    if page.left_out:
        parts.append(
            '<p class="note">Published methods not ranked (outside the official roster;'
            " --roster all ranks them): "
            f"{escape(', '.join(page.left_out))}</p>"
        )
    if page.published and page.scored:
        parts.append(
            '<p class="note">Rows marked published are the official numbers of the bench_results'
            " CSV; they are the same under every policy, ranked together with ours.</p>"
        )
    if page.scored and any(len(agg.run_splits(run.info())) > 1 for run in page.runs.values()):
        parts.append(
            '<p class="note">A full run is also ranked on its lite stories; its run-level values'
            " there (the Inception Score) are computed over its lite images, as the official"
            " recomputes them per split.</p>"
        )
    parts.extend(f'<p class="note split-fallback">{escape(note)}</p>' for note in page.split_notes)
    parts.extend(_board_notes(page))
    for policy, board in page.boards.items():
        parts.append(f"<h3>{escape(_POLICY_TITLES[policy])}</h3>")
        if board.empty:
            parts.append('<p class="note">No ranked runs.</p>')
            continue
        for split, part in board.groupby("split", sort=False):
            parts.append(
                f'<h4>split {escape(str(split))}</h4><div class="scroll">'
                f"{_board_table(part, policy, str(split))}</div>"
            )
    parts.append("</section>")
    return "".join(parts)


def _board_notes(page: Page) -> list[str]:
    """What the page says about the boards: categories nobody scored, the metric settings."""
    out = []
    board = page.boards.get("official")
    if board is not None and not board.empty:
        for split, categories in agg.not_scored(board).items():
            names = ", ".join(lb.CATEGORY_HEADERS[c].removesuffix("_rank") for c in categories)
            out.append(
                f'<p class="note not-scored">split {escape(split)}: {escape(names)} not scored'
                " by any system: every row ties there (the official ranks it so), so its rank"
                " is not shown; the overall rank still counts it as the official does.</p>"
            )
        if "metric_settings" in board.columns and page.scored:
            out.append(
                '<p class="note">metric_settings: "official settings" when all five evaluators'
                " scored the row's runs with the official settings (checkpoints by name, judge"
                ' gpt-4.1, parameters at the official values); "not comparable" says what'
                " differs (stand-ins, another judge or checkpoint, an evaluator not run)."
                " Checkpoints are recognised by name; their fingerprints are in"
                " evaluators.json. The ports' documented departures (README, Fidelity) apply"
                " to every row of ours.</p>"
            )
    return out


def _no_scores_note(page: Page) -> str:
    run = page.run_dir if page.run_dir is not None else Path("RUN_DIR")
    where = page.scores_path if page.scores_path is not None else run / "scores.jsonl"
    return (
        f"No scores yet ({where} does not exist or has no scored rows): the leaderboard of our"
        " systems appears once the run is scored. Score it with `python -m omnistory_core"
        f" evaluate {run}`, then rebuild this page with `python -m omnistory_core report --task"
        f" vistorybench --scores {where} --run-dir {run} --out {page.out_dir}`."
    )


_TEXT_COLUMNS = ("Method", "model", "mode", "model_key", "source", "metric_settings")


def _board_table(board: pd.DataFrame, policy: str, split: str) -> str:
    columns = [str(c) for c in board.columns if c != "split"]
    head = "".join(
        f'<th class="l">{escape(c)}</th>'
        if c in _TEXT_COLUMNS
        else f'<th title="{escape(c)}">{escape(agg.PAPER_NAMES.get(c) or c)}</th>'
        for c in columns
    )
    ranks = set(lb.CATEGORY_HEADERS.values())
    rows = []
    for record in board[columns].to_dict("records"):
        source = record.get("source", "")
        cls = ' class="published"' if source == PUBLISHED else ""
        cells = []
        for c in columns:
            value = record[c]
            text = escape(_fmt(value))
            if c in ranks and text == "—":
                text = '<span class="not-scored">not scored</span>'
            if c == "model" and source == PUBLISHED:
                text += f'<span class="badge">{PUBLISHED}</span>'
            align = ' class="l"' if c in _TEXT_COLUMNS else ""
            cells.append(f"<td{align}>{text}</td>")
        rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return (
        f'<table class="leaderboard" data-policy="{escape(policy)}" data-split="{escape(split)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _left(text: bool) -> str:
    return ' class="l"' if text else ""


def _fmt(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.1f}"
    return str(value)


def _failures_section(page: Page) -> str:
    parts = ['<section id="failures"><h2>Failures per metric</h2>']
    if page.failures.empty:
        parts.append('<p class="note">No scores rows.</p></section>')
        return "".join(parts)
    text = ("system", "evaluator", "metric", "scope")
    head = "".join(f"<th{_left(c in text)}>{escape(c)}</th>" for c in page.failures.columns)
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td{_left(c in text)}>{escape(_fmt(v))}</td>"
            for c, v in zip(page.failures.columns, r, strict=True)
        )
        + "</tr>"
        for r in page.failures.itertuples(index=False)
    )
    parts.append(f'<table class="failures"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody>')
    parts.append("</table></section>")
    return "".join(parts)


# -- story strips -------------------------------------------------------------------------------


@dataclass
class _Story:
    story_id: str
    story_type: str
    shots: list[int]
    characters: list[tuple[str, str, list[Path]]]  # key, name, reference images


def _stories(page: Page) -> list[_Story]:
    """The stories of the run, in dataset order: from each job's dataset (the first job that
    loads wins for a story; jobs on the same dataset load it once), else from its records (no
    reference images then)."""
    stories: dict[str, _Story] = {}
    from_dataset: set[str] = set()
    loaded: dict[str, list[vistory.Story]] = {}
    for run in page.runs.values():
        key = json.dumps(
            [run.dataset.get("root"), run.dataset.get("name"), run.split, run.language,
             run.story_ids],
            default=str,
        )  # fmt: skip
        if key not in loaded:
            loaded[key] = _load_stories(run, page.notes)
        for story in loaded[key]:
            if story.id not in stories:
                from_dataset.add(story.id)
                stories[story.id] = _Story(
                    story.id,
                    story.story_type,
                    [s.index for s in story.shots],
                    [(k, c.name, list(c.images)) for k, c in story.characters.items()],
                )
        for row in run.records:
            sid = str(row["story_id"])
            entry = stories.setdefault(sid, _Story(sid, "", [], []))
            index = int(row["shot_index"])
            if sid not in from_dataset and index not in entry.shots:
                entry.shots.append(index)
    for entry in stories.values():
        entry.shots.sort()
    return sorted(stories.values(), key=lambda s: (len(s.story_id), s.story_id))


def _load_stories(run: JobRun, notes: list[str]) -> list[vistory.Story]:
    spec = run.dataset
    root = spec.get("root")
    path = Path(str(root)) if root else None
    if (path is None or not path.is_dir()) and spec.get("name") == "vistory_fixture":
        path = vistory.fixture_root()
    if path is None or not path.is_dir():
        notes.append(f"{run.system}: dataset root {root!r} not found: no reference images")
        return []
    try:
        return vistory.load_stories(
            path,
            split=run.split if run.split in vistory.SPLITS else "full",
            language=run.language if run.language in vistory.LANGUAGES else "en",
            stories=run.story_ids,
        )
    except (DatasetError, OSError) as exc:
        notes.append(f"{run.system}: the dataset did not load ({exc}): no reference images")
        return []


def _strips_html(page: Page) -> str:
    parts = ['<section id="stories"><h2>Stories</h2>']
    if not page.runs:
        why = (
            f"no ViStoryBench job directory in {page.run_dir}"
            if page.run_dir is not None
            else "no job directory given (--run-dir)"
        )
        parts.append(f'<p class="note">No story strips: {escape(why)}.</p>')
    stories = _stories(page)
    for story in stories:
        parts.append(_story_html(page, story))
    parts.extend(f'<p class="note">{escape(n)}</p>' for n in page.notes)
    parts.append("</section>")
    return "".join(parts)


def _story_html(page: Page, story: _Story) -> str:
    sid = escape(story.story_id)
    refs = []
    for key, name, images in story.characters:
        for i, image in enumerate(images):
            src = _asset(page, image, Path("refs", story.story_id, _slug(key), f"{i:02d}"))
            label = escape(name if len(images) == 1 else f"{name} ({i + 1})")
            img = f'<img src="{src}" alt="{label}">' if src else "unreadable"
            refs.append(
                f'<figure class="ref" data-character="{escape(key)}">{img}'
                f"<figcaption>{label}</figcaption></figure>"
            )
    if not refs:
        refs.append('<p class="note">no character reference images</p>')
    systems = [
        _system_strip(page, run, story) for run in page.runs.values() if _has_story(run, story)
    ]
    title = f"Story {sid}" + (f" · {escape(story.story_type)}" if story.story_type else "")
    return (
        f'<div class="story" id="story-{sid}" data-story="{sid}"><h3>{title}</h3>'
        f'<div class="refs" data-story="{sid}">{"".join(refs)}</div>{"".join(systems)}</div>'
    )


def _has_story(run: JobRun, story: _Story) -> bool:
    if run.story_ids is not None:
        return story.story_id in run.story_ids
    return any(str(r["story_id"]) == story.story_id for r in run.records)


def _system_strip(page: Page, run: JobRun, story: _Story) -> str:
    by_shot = {int(r["shot_index"]): r for r in run.records if str(r["story_id"]) == story.story_id}
    cells = []
    for index in story.shots:
        row = by_shot.get(index)
        label = f"shot {index:02d}"
        src = None
        reason = "no record"
        if row is not None and row.get("status") == "ok" and row.get("path"):
            image = run.path / str(row["path"])
            dest = Path("shots", _slug(run.system), story.story_id, f"shot_{index:02d}")
            src = _asset(page, image, dest) if image.is_file() else None
            reason = "image unreadable" if image.is_file() else "image file missing"
        elif row is not None:
            reason = str(row.get("category") or row.get("status") or "missing")
        if src:
            cells.append(
                f'<figure class="shot" data-shot="{index}"><img src="{src}" alt="{escape(label)}">'
                f"<figcaption>{escape(label)}</figcaption></figure>"
            )
        else:
            cells.append(
                f'<figure class="shot-missing" data-shot="{index}"><div class="shot missing">'
                f"missing: {escape(reason)}</div><figcaption>{escape(label)}</figcaption></figure>"
            )
    where = f"{run.mode} / {run.language} / {run.timestamp}"
    return (
        f'<div class="system"><h4>{escape(run.system)} <span class="note">{escape(where)}'
        f'</span></h4><div class="strip" data-system="{escape(run.system)}" '
        f'data-story="{escape(story.story_id)}">{"".join(cells)}</div></div>'
    )


def _slug(name: str) -> str:
    """A file-name-safe form of ``name``, unique per name (a short hash of it appended when the
    name had to change)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "x"
    if safe == name:
        return safe
    return f"{safe}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def _asset(page: Page, source: Path, stem: Path) -> str | None:
    """Copy ``source`` into the report's assets (a thumbnail of ``page.thumbnail`` pixels, or the
    file itself with ``thumbnail=0``) and return its relative URL; None when it cannot be read."""
    from PIL import Image, UnidentifiedImageError

    rel = Path(ASSETS, stem)
    if page.thumbnail == 0:
        rel = rel.with_suffix(source.suffix.lower())
        dest = page.out_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)
        return rel.as_posix()
    rel = rel.with_suffix(".jpg")
    dest = page.out_dir / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with Image.open(source) as image:
            image.thumbnail((page.thumbnail, page.thumbnail))
            image.convert("RGB").save(dest, "JPEG", quality=85)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        log.warning("report: cannot read image %s (%s)", source, exc)
        return None
    return rel.as_posix()


__all__ = [
    "OPTIONS",
    "POLICIES",
    "ROSTERS",
    "ReportError",
    "build_report",
    "discover_runs",
    "failure_counts",
    "read_published",
    "read_score_lines",
    "settings_column",
]
