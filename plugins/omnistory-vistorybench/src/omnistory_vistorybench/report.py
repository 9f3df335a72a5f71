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

import logging
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from omnistory_vistorybench import aggregation as agg
from omnistory_vistorybench import leaderboard as lb
from omnistory_vistorybench.report_html import ASSETS, Page, render
from omnistory_vistorybench.report_inputs import (
    ReportError,
    ScoreLine,
    discover_runs,
    failure_counts,
    read_published,
    read_score_lines,
)

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


__all__ = [
    "OPTIONS",
    "POLICIES",
    "ROSTERS",
    "build_report",
    "settings_column",
]
