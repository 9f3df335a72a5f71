"""Means over stories, from the long scores table (:mod:`omnistory_vistorybench.leaderboard`
describes it): per (run, split, metric) the official, valid-only and zero-filled means
(:func:`story_means`), and the run table they make (:func:`run_means`), ready for
:func:`omnistory_vistorybench.leaderboard.official_leaderboard`, as the official
``result_management/manager.py`` and ``utils/export_bench_results_csv.py`` compute them.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

import pandas as pd

from omnistory_core.api import STATUSES
from omnistory_vistorybench.leaderboard import (
    DEFAULT_SPLIT,
    KEY_COLUMNS,
    RUN_KEYS,
    _as_key,
    _is_value,
    _mean_in_order,
    _metric_columns,
)

_ALIASES = {"system": "method", "score": "value"}
_LONG_DEFAULTS = {"mode": "default", "language": "en", "timestamp": ""}


def _normalise_long(rows: pd.DataFrame) -> pd.DataFrame:
    frame = rows.rename(columns={k: v for k, v in _ALIASES.items() if k in rows.columns})
    missing = [c for c in ("method", "story_id", "metric", "value", "status") if c not in frame]
    if missing:
        raise ValueError(f"scores table lacks column(s) {missing}; it has {list(rows.columns)}")
    frame = frame.copy()
    for col, default in _LONG_DEFAULTS.items():
        if col not in frame.columns:
            frame[col] = default
    if "split" not in frame.columns:
        frame["split"] = ""
    for col in ("method", "mode", "language", "timestamp", "story_id", "split", "metric"):
        frame[col] = [_as_key(v) for v in frame[col]]
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    bad = frame.index[~frame["status"].isin(STATUSES)]
    if len(bad):
        raise ValueError(
            f"scores row {bad[0]!r}: status {frame.at[bad[0], 'status']!r} is not one of {STATUSES}"
        )
    no_value = frame.index[(frame["status"] == "ok") & ~frame["value"].map(_is_value)]
    if len(no_value):
        raise ValueError(f"scores row {no_value[0]!r} has status 'ok' but no finite value")
    keys = [*RUN_KEYS, "split", "story_id", "metric"]
    dup = frame.index[frame.duplicated(keys)]
    if len(dup):
        key = dict(frame.loc[dup[0], keys])
        raise ValueError(f"scores row {dup[0]!r} repeats {key}: one row per (run, story, metric)")
    return frame


def _story_universe(stories: pd.DataFrame, story_ids: Collection[str] | None) -> set[str]:
    if story_ids is not None:
        return {str(s) for s in story_ids}
    return set(stories["story_id"])


def _metric_means(
    story_rows: pd.DataFrame, dataset_rows: pd.DataFrame, universe: set[str]
) -> dict[str, float | int]:
    """official / valid-only / zero-filled means of one (run, metric), and its counts."""
    ok = story_rows[story_rows["status"] == "ok"]
    errors = set(story_rows.loc[story_rows["status"] == "error", "story_id"])
    valid_only = _mean_in_order(ok["value"])
    counted = len(universe - errors)
    zero_filled = sum(ok["value"].tolist()) / counted if counted else math.nan
    n_valid = len(ok)
    dataset_ok = dataset_rows[dataset_rows["status"] == "ok"]
    official = valid_only
    if len(dataset_ok):
        # scores.json wins over the story means, as in the official summary
        official = float(dataset_ok["value"].iloc[0])
    if story_rows.empty and len(dataset_rows):
        valid_only = official if len(dataset_ok) else math.nan
        failed = (dataset_rows["status"].isin(("missing_output", "invalid"))).any()
        zero_filled = official if len(dataset_ok) else (0.0 if failed else math.nan)
        n_valid = len(dataset_ok)
    return {
        "official": official,
        "valid_only": valid_only,
        "zero_filled": zero_filled,
        "n_stories": len(universe),
        "n_valid": n_valid,
        "n_errors": len(errors),
    }


def story_means(
    rows: pd.DataFrame, story_ids: Collection[str] | None = None, split: str = ""
) -> pd.DataFrame:
    """The mean over stories of each (run, metric) of a long scores table (module docstring).

    Columns: ``method, mode, language, timestamp, metric``, then

    * ``official``: as the official summary computes it: the dataset-scope value when the run
      has one for that metric (``scores.json``), else the unweighted mean over the stories that
      have a value (the official's ``story_results.json`` holds only those);
    * ``valid_only``: the mean over the stories with status ``ok``;
    * ``zero_filled``: the same sum over every story of the run, a story without a value
      counting 0; a story whose evaluator failed (``error``) is left out under both policies;
    * ``n_stories`` (the run's stories), ``n_valid``, ``n_errors``.

    A run's stories are ``story_ids`` when given (rows of other stories are ignored, and a story
    with no row counts 0 under zero-filled), else every story the run has a row for, under any
    metric.  ``split`` selects rows whose ``split`` is empty or equal to it.  A metric with only
    dataset-scope rows has its dataset value under all three policies (0 under zero-filled when
    the row is ``missing_output`` or ``invalid``).
    """
    frame = _normalise_long(rows)
    frame = frame[frame["split"].isin({"", split})]
    out: list[dict[str, object]] = []
    for run, run_rows in frame.groupby(list(RUN_KEYS), sort=False):
        stories = run_rows[run_rows["story_id"] != ""]
        if story_ids is not None:
            stories = stories[stories["story_id"].isin({str(s) for s in story_ids})]
        universe = _story_universe(stories, story_ids)
        dataset = run_rows[run_rows["story_id"] == ""]
        for metric in dict.fromkeys([*stories["metric"], *dataset["metric"]]):
            means = _metric_means(
                stories[stories["metric"] == metric], dataset[dataset["metric"] == metric], universe
            )
            out.append({**dict(zip(RUN_KEYS, run, strict=True)), "metric": metric, **means})
    columns = [*RUN_KEYS, "metric", "official", "valid_only", "zero_filled"]
    return pd.DataFrame(out, columns=[*columns, "n_stories", "n_valid", "n_errors"])


def run_means(
    rows: pd.DataFrame,
    splits: Mapping[str, Collection[str] | None] | None = None,
    policy: str = "official",
) -> pd.DataFrame:
    """A long scores table as a run table (one row per split and run, one column per metric):
    what the official ``bench_results_<split>.csv`` holds, ready for
    :func:`official_leaderboard`.

    ``splits`` maps a split name to its story ids (``None`` = every story of the run), e.g.
    ``{"lite": LITE_IDS, "full": None}``; by default one split ``all`` with every story.
    ``policy`` is the :func:`story_means` column to use: ``official``, ``valid_only`` or
    ``zero_filled``.  Metric columns are sorted by name, as the official export sorts them.
    """
    if policy not in ("official", "valid_only", "zero_filled"):
        raise ValueError(f"policy must be official, valid_only or zero_filled, not {policy!r}")
    parts = []
    for split, ids in (splits or {DEFAULT_SPLIT: None}).items():
        means = story_means(rows, ids, split=split)
        if means.empty:
            continue
        runs = pd.MultiIndex.from_frame(means[list(RUN_KEYS)].drop_duplicates())
        wide = means.pivot(index=list(RUN_KEYS), columns="metric", values=policy)
        wide = wide.reindex(runs).reset_index()
        wide.insert(0, "split", split)
        parts.append(wide)
    if not parts:
        return pd.DataFrame(columns=list(KEY_COLUMNS))
    table = pd.concat(parts, ignore_index=True)
    table.columns.name = None
    return table[[*KEY_COLUMNS, *sorted(_metric_columns(table))]]
