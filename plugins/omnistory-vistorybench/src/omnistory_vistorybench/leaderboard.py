"""ViStoryBench's rank-based leaderboard, as the official ``utils/summarize_leaderboard.py`` builds
it, and the per-run means it ranks, as ``result_management/manager.py`` and
``utils/export_bench_results_csv.py`` compute them.

Frames
------
*Long scores table* (the input of :func:`story_means` and :func:`run_means`): one row per
(run, story, metric), columns

``method`` (alias ``system``), ``mode``, ``language``, ``timestamp``, ``story_id``, ``metric``,
``value`` (alias ``score``; a float, or NaN), ``status``, and optionally ``split``.

A run is (method, mode, language, timestamp); ``mode``, ``language`` and ``timestamp`` default to
``"default"``, ``"en"`` and ``""`` (the official ResultManager's defaults) when the column is
absent.  ``story_id`` is empty (``""``, None or NaN) on a *dataset-scope* row: a metric computed
once per run (the Inception Score, the official ``metrics/<m>/scores.json``).  ``metric`` is the
official story-level key (``cids_self_mean``, ``self_csd``, ``scene``...; see
:data:`OFFICIAL_COLUMNS`).  ``status`` is the core scores contract's: ``ok`` (a value),
``missing_output``, ``invalid`` (no value; 0 under zero-filled) or ``error`` (no value; left out
under both policies, as in the core's leaderboard).  A non-empty ``split`` restricts a row to that
split (the official recomputes the Inception Score per subset).

*Run table* (the output of :func:`run_means` and :func:`read_bench_results_csv`, the input of
:func:`official_leaderboard`): one row per run, columns ``split, method, mode, language,
timestamp`` followed by one float column per metric, named by the short key.  It is the official
``bench_results_{lite,full}.csv`` with that file's columns renamed: its ``model`` column holds the
mode and its ``mode`` column the language (the official ``add_inception_score_to_result_csv.py``
reads them so), and ``metrics.<evaluator>.metrics.<key>`` becomes ``<key>``.

Official behaviour reproduced, and where this module departs from it
---------------------------------------------------------------------
* Runs are averaged per (method, mode) over languages and timestamps, each metric over the rows
  that have it; the sum runs in row order, like the official, so that equal inputs give bitwise
  equal means and the same ties.
* Ranks: per sub-metric, average ranks for ties, higher is better, a missing value gets rank *n*
  (the number of runs ranked, even when several are missing); a category's score is the mean of
  its sub-metric ranks and its rank the average-tie rank of that score.  The best mode of a method
  has the lowest mean of its five category ranks, ranks taken over every mode of every method.
  The chosen modes are ranked again among themselves; category ranks become dense integers and
  ``overall_rank`` is the dense rank of the mean of the five integers (ties share a rank, the
  next rank follows without a gap).  Rows are sorted by overall rank, ties by method name.
* Departure: on a tie in mean category rank the official keeps whichever mode comes first in the
  iteration order of a Python ``set`` of (method, mode) keys, which changes with string-hash
  randomisation; this module takes the first mode name in sort order.
* ``Method`` is the method's group label (the official roster, :data:`OFFICIAL_GROUPS`); the
  official ranks only the methods of its roster.  Pass ``groups=OFFICIAL_GROUPS`` for that; with
  ``groups=None`` every method is ranked and ``Method`` is ``""``, the label the official gives a
  method outside its roster.
* ``prompt_align_avg`` reproduces the official "Prompt Align Avg" column (see
  :func:`prompt_align_avg`).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from omnistory_core.api import STATUSES

#: the five ranked categories, in the official order (the order the overall mean sums them in)
CATEGORIES: dict[str, tuple[str, ...]] = {
    "char": ("cids_self_mean", "cids_cross_mean"),
    "style": ("self_csd", "cross_csd"),
    "prompt": ("camera", "character_action", "scene", "single_character_action"),
    "quality": ("aesthetic_score",),
    "diversity": ("inception_score",),
}

CATEGORY_HEADERS: dict[str, str] = {
    "char": "Character Consistency(CRef)_rank",
    "style": "Style Consistency(SRef)_rank",
    "prompt": "Prompt Alignment_rank",
    "quality": "Generative Quality_rank",
    "diversity": "Diversity_rank",
}

#: the official leaderboard CSV's headers, in its order
LEADERBOARD_HEADERS: tuple[str, ...] = (
    "Method",
    "model",
    "mode",
    *CATEGORY_HEADERS.values(),
    "overall_rank",
    "model_key",
)

#: short metric key -> the official bench_results CSV column (``metrics.<evaluator>.metrics.<key>``,
#: the evaluator directory under ``bench_results/.../metrics/`` and the key its story results hold)
OFFICIAL_COLUMNS: dict[str, str] = {
    "cids_self_mean": "metrics.cids.metrics.cids_self_mean",
    "cids_cross_mean": "metrics.cids.metrics.cids_cross_mean",
    "copy_paste_score": "metrics.cids.metrics.copy_paste_score",
    "occm": "metrics.cids.metrics.occm",
    "single_character_action": "metrics.cids.metrics.single_character_action",
    "self_csd": "metrics.csd.metrics.self_csd",
    "cross_csd": "metrics.csd.metrics.cross_csd",
    "aesthetic_score": "metrics.aesthetic.metrics.aesthetic_score",
    "scene": "metrics.prompt_align.metrics.scene",
    "camera": "metrics.prompt_align.metrics.camera",
    "character_action": "metrics.prompt_align.metrics.character_action",
    "character_existence": "metrics.prompt_align.metrics.character_existence",
    "character_existence_number": "metrics.prompt_align.metrics.character_existence_number",
    "character_number": "metrics.prompt_align.metrics.character_number",
    "inception_score": "metrics.diversity.metrics.inception_score",
    "inception_score_std": "metrics.diversity.metrics.inception_score_std",
}

#: the metric values shown after the ranks: the official raw-metric table's order, with
#: copy-paste (not in that table, lower is better, never ranked) after OCCM
SHOWN_METRICS: tuple[str, ...] = (
    "cross_csd",
    "self_csd",
    "cids_cross_mean",
    "cids_self_mean",
    "aesthetic_score",
    "inception_score",
    "occm",
    "copy_paste_score",
    "scene",
    "camera",
    "character_action",
    "single_character_action",
    "prompt_align_avg",
)

#: display labels: the official raw-metric table's headers (copy-paste's is this module's own)
DISPLAY_NAMES: dict[str, str] = {
    "cross_csd": "Cross CSD Score (Ref-Gen)",
    "self_csd": "Self CSD Score (Gen-Gen)",
    "cids_cross_mean": "Cross Cref Score (Ref-Gen)",
    "cids_self_mean": "Self Cref Score (Gen-Gen)",
    "aesthetic_score": "Aesthetics Score",
    "inception_score": "Inception Score",
    "occm": "OCCM",
    "copy_paste_score": "Copy-Paste Score",
    "scene": "Scene",
    "camera": "Camera",
    "character_action": "Global Character Action",
    "single_character_action": "Local/Single Character Action",
    "prompt_align_avg": "Prompt Align Avg",
}

#: the official roster (``INCLUDED_GROUPS``): method -> its group label
OFFICIAL_GROUPS: dict[str, str] = {
    **dict.fromkeys(
        (
            "CharaConsist",
            "OmniGen2",
            "QwenImageEdit2509",
            "SeedStory",
            "StoryAdapter",
            "StoryDiffusion",
            "StoryGen",
            "TheaterGen",
            "UNO",
        ),
        "Story image method",
    ),
    **dict.fromkeys(
        ("AnimDirector", "MMStoryAgent", "MovieAgent", "Vlogger"), "Story video method"
    ),
    **dict.fromkeys(
        ("AIbrm", "DouBao", "MOKI", "MorphicStudio", "ShenBi", "TypeMovie"),
        "Commercial platform",
    ),
    **dict.fromkeys(("GPT4o", "Gemini", "NanoBanana", "Sora2", "Seedream4"), "MLLM model"),
}

RUN_KEYS: tuple[str, ...] = ("method", "mode", "language", "timestamp")
KEY_COLUMNS: tuple[str, ...] = ("split", *RUN_KEYS)
DEFAULT_SPLIT = "all"

_PROMPT_KEYS = ("scene", "camera", "character_action", "single_character_action")
# the official looks for an existence metric in this order; single_character_action is last,
# which is how it ends up counted twice when no prompt_align existence metric exists
_EXISTENCE_KEYS = (
    "character_existence",
    "character_existence_number",
    "character_number",
    "single_character_action",
)
_CSV_FRONT = ("method", "model", "mode", "timestamp")
_CSV_METRIC = re.compile(r"^metrics\.([^.]+)\.metrics\.(.+)$")
_ALIASES = {"system": "method", "score": "value"}
_LONG_DEFAULTS = {"mode": "default", "language": "en", "timestamp": ""}


# ----------------------------------------------------------------------------------------------
# small numeric helpers


def _is_value(v: object) -> bool:
    # the official's safe_float: None, NaN and +-inf are all "no value"
    return isinstance(v, (int, float)) and math.isfinite(v)


def _mean_in_order(values: Iterable[float]) -> float:
    # sequential sum, not pandas' compensated one, so means match the official to the last bit
    vals = [float(v) for v in values if _is_value(v)]
    return sum(vals) / len(vals) if vals else math.nan


def _metric_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c not in KEY_COLUMNS]


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    if name in frame.columns:
        return pd.to_numeric(frame[name], errors="coerce").astype(float)
    return pd.Series(math.nan, index=frame.index, dtype=float)


# ----------------------------------------------------------------------------------------------
# ranks


def submetric_ranks(values: pd.Series) -> pd.Series:
    """Official sub-metric ranks: 1 = highest, average ranks for ties, a missing value gets the
    worst rank *n* (the number of runs), also when several are missing."""
    values = values.astype(float).where(lambda s: s.map(_is_value))
    return values.rank(method="average", ascending=False).fillna(float(len(values)))


def category_ranks(means: pd.DataFrame) -> pd.DataFrame:
    """Per category, the average-tie rank of the mean of its sub-metric ranks (lower is better);
    one column per category, ranked over all rows of ``means``."""
    out: dict[str, pd.Series] = {}
    for category, subs in CATEGORIES.items():
        ranks = pd.concat([submetric_ranks(_column(means, m)) for m in subs], axis=1)
        out[category] = ranks.mean(axis=1).rank(method="average", ascending=True)
    return pd.DataFrame(out, index=means.index, columns=list(CATEGORIES))


def dense_ranks(values: pd.Series) -> pd.Series:
    """Dense integer ranks, lowest value first (the official's ordinal conversion)."""
    return values.rank(method="dense", ascending=True).astype(int)


# ----------------------------------------------------------------------------------------------
# the leaderboard


def _check_run_table(frame: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ("method", "mode") if c not in frame.columns]
    if missing:
        raise ValueError(f"run table lacks column(s) {missing}; it has {list(frame.columns)}")
    frame = frame.copy()
    if "split" not in frame.columns:
        frame["split"] = DEFAULT_SPLIT
    for col in ("split", "method", "mode"):
        frame[col] = [_as_key(v) for v in frame[col]]
    for col in ("method", "mode"):
        empty = frame.index[frame[col] == ""]
        if len(empty):
            raise ValueError(f"run table row {empty[0]!r} has an empty {col!r}")
    return frame


def method_mode_means(frame: pd.DataFrame) -> pd.DataFrame:
    """Average a run table per (split, method, mode) over its languages and timestamps: each
    metric over the rows that have a value (NaN when none has).  Groups keep the order they first
    appear in; the result has columns ``split, method, mode`` and the metric columns."""
    frame = _check_run_table(frame)
    metrics = _metric_columns(frame)
    numeric = frame[metrics].apply(pd.to_numeric, errors="coerce").astype(float)
    numeric[["split", "method", "mode"]] = frame[["split", "method", "mode"]]
    grouped = numeric.groupby(["split", "method", "mode"], sort=False)[metrics]
    if not metrics:
        return grouped.size().reset_index()[["split", "method", "mode"]]
    return grouped.agg(_mean_in_order).reset_index()


def prompt_align_avg(metrics: Mapping[str, float], faithful: bool = True) -> float:
    """The official "Prompt Align Avg" of one (method, mode)'s metric means.

    ``faithful=True`` (the official column): the mean of whichever of ``scene``, ``camera``,
    ``character_action`` and ``single_character_action`` have a value, plus one more term, the
    value of the first of ``character_existence``, ``character_existence_number``,
    ``character_number`` and ``single_character_action`` that has one.  No evaluator produces the
    first three today, so single_character_action counts twice:
    (scene + camera + character_action + 2 * single_character_action) / 5.

    ``faithful=False``: the plain mean of the four prompt metrics that have a value.
    NaN when none has a value.
    """
    values = [metrics.get(k, math.nan) for k in _PROMPT_KEYS]
    if faithful:
        extra = next((metrics[k] for k in _EXISTENCE_KEYS if _is_value(metrics.get(k))), None)
        if extra is not None:
            values.append(extra)
    return _mean_in_order(values)


def best_modes(means: pd.DataFrame) -> pd.DataFrame:
    """Each method's best mode within one split: lowest mean of the five category ranks taken over
    every (method, mode) row of ``means``; a tie goes to the first mode name in sort order (the
    official's pick depends on set iteration order).  Returns the chosen rows, by method name."""
    ranks = category_ranks(means)
    chosen = means.assign(_mean_rank=ranks.sum(axis=1) / len(CATEGORIES))
    chosen = chosen.sort_values(["method", "_mean_rank", "mode"], kind="mergesort")
    return chosen.groupby("method", sort=False).head(1).drop(columns="_mean_rank")


def _rank_chosen(chosen: pd.DataFrame) -> pd.DataFrame:
    ints = category_ranks(chosen).apply(dense_ranks)
    overall = dense_ranks(ints.sum(axis=1) / len(CATEGORIES))
    return ints.assign(overall_rank=overall)


def _split_leaderboard(
    means: pd.DataFrame, groups: Mapping[str, str] | None, faithful: bool
) -> pd.DataFrame:
    if groups is not None:
        means = means[means["method"].isin(list(groups))]
    means = means.reset_index(drop=True)
    if means.empty:
        return pd.DataFrame(columns=[*LEADERBOARD_HEADERS, "split", *SHOWN_METRICS])
    chosen = best_modes(means).reset_index(drop=True)
    ranks = _rank_chosen(chosen)
    label = [(groups or {}).get(m, "") for m in chosen["method"]]
    table = pd.DataFrame(
        {
            "Method": label,
            "model": chosen["method"],
            "mode": chosen["mode"],
            **{CATEGORY_HEADERS[c]: ranks[c] for c in CATEGORIES},
            "overall_rank": ranks["overall_rank"],
            "model_key": [f"{g} - {m}" for g, m in zip(label, chosen["method"], strict=True)],
            "split": chosen["split"],
        }
    )
    for metric in SHOWN_METRICS[:-1]:
        table[metric] = _column(chosen, metric)
    records = chosen.drop(columns=["split", "method", "mode"]).to_dict("records")
    table["prompt_align_avg"] = [prompt_align_avg(r, faithful=faithful) for r in records]
    # chosen is sorted by method, so a stable sort leaves overall-rank ties by method name
    return table.sort_values("overall_rank", kind="mergesort").reset_index(drop=True)


def official_leaderboard(
    frame: pd.DataFrame, groups: Mapping[str, str] | None = None, faithful: bool = True
) -> pd.DataFrame:
    """The official leaderboard of a run table (see the module docstring), one block per split
    (ranked separately, in the order splits first appear).

    Columns: :data:`LEADERBOARD_HEADERS` (``Method`` = group label, ``model`` = the method,
    ``mode`` = its best mode, the five integer category ranks, ``overall_rank``, ``model_key`` =
    ``"<group> - <method>"``), then ``split`` and the chosen (method, mode)'s means of
    :data:`SHOWN_METRICS` (NaN when absent).  ``groups`` maps method -> group label and restricts
    the ranking to its methods (:data:`OFFICIAL_GROUPS` is the official roster); ``None`` ranks
    every method.  ``faithful`` selects how ``prompt_align_avg`` is computed
    (:func:`prompt_align_avg`): True reproduces the official column, which counts
    single_character_action twice when no character-existence metric exists; False takes the
    plain mean of the four prompt-alignment metrics.
    """
    means = method_mode_means(frame)
    blocks = [
        _split_leaderboard(part, groups, faithful) for _, part in means.groupby("split", sort=False)
    ]
    if not blocks:
        return pd.DataFrame(columns=[*LEADERBOARD_HEADERS, "split", *SHOWN_METRICS])
    return pd.concat(blocks, ignore_index=True)


def write_leaderboard_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write a leaderboard (or any frame) as CSV the way the official does: UTF-8 with a BOM, no
    index, missing values as empty cells.  Creates the parent directory; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, encoding="utf-8-sig", na_rep="")
    return path


# ----------------------------------------------------------------------------------------------
# the official bench_results CSV


def _csv_error(path: Path, message: str) -> ValueError:
    return ValueError(f"{path}: {message}")


def _short_names(path: Path, header: Sequence[str]) -> dict[str, str]:
    """Official metric column -> short key, for the ``metrics.<ev>.metrics.<key>`` columns."""
    names: dict[str, str] = {}
    for col in header:
        match = _CSV_METRIC.match(col)
        if match is None:
            continue
        short = match.group(2)
        clash = next((c for c, s in names.items() if s == short), None)
        if clash is not None:
            raise _csv_error(path, f"columns {clash!r} and {col!r} both map to metric {short!r}")
        names[col] = short
    return names


def _parse_metric(path: Path, row: int, line: int, column: str, text: str) -> float:
    text = text.strip()
    if text == "" or text.lower() == "nan":
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise _csv_error(
            path, f"row {row} (line {line}), column {column!r}: {text!r} is not a number"
        ) from None
    # the official reads +-inf as "no value"
    return value if math.isfinite(value) else math.nan


def _split_from_name(path: Path) -> str:
    stem = path.stem.lower()
    for split in ("lite", "full"):
        if stem.endswith(f"_{split}"):
            return split
    return DEFAULT_SPLIT


def _header(path: Path, reader: Iterable[list[str]]) -> list[str]:
    header = next(iter(reader), None)
    if not header:
        raise _csv_error(path, "no header row")
    header = [h.strip() for h in header]
    duplicates = sorted({h for h in header if header.count(h) > 1})
    if duplicates:
        raise _csv_error(path, f"duplicate column(s) {duplicates}")
    missing = [c for c in _CSV_FRONT if c not in header]
    if missing:
        raise _csv_error(path, f"missing column(s) {missing}; the header is {header}")
    return header


def read_bench_results_csv(path: str | Path, split: str | None = None) -> pd.DataFrame:
    """Read an official ``bench_results*.csv`` (``utils/export_bench_results_csv.py``'s output:
    ``method, model, mode, timestamp`` then ``metrics.<evaluator>.metrics.<key>`` columns, UTF-8
    with or without BOM) as a run table (module docstring): ``model`` -> ``mode``, ``mode`` ->
    ``language``, each metric column -> its ``<key>``.  Other columns (the flattened ``run.*``,
    ``metrics.<ev>.metric.*``, ``scope.*`` of the all-runs export) are dropped.

    ``split`` labels the rows; by default ``lite``/``full`` from a name ending in ``_lite`` or
    ``_full``, else ``all``.  A malformed file raises ValueError naming the file, and the row (1 =
    the first data row), line and column where it applies: no header, a missing front column,
    duplicate columns, a row with too many or too few cells, an empty method or mode, a metric cell
    that is not a number (empty and ``nan`` are missing values).
    """
    path = Path(path)
    split = _split_from_name(path) if split is None else split
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        header = _header(path, reader)
        names = _short_names(path, header)
        records: list[dict[str, object]] = []
        for row, cells in enumerate(reader, 1):
            if not cells:
                continue
            line = reader.line_num
            if len(cells) != len(header):
                counts = f"{len(cells)} cells, the header {len(header)}"
                raise _csv_error(path, f"row {row} (line {line}) has {counts}")
            cell = dict(zip(header, cells, strict=True))
            for col in ("method", "model"):
                if not cell[col].strip():
                    raise _csv_error(path, f"row {row} (line {line}), column {col!r} is empty")
            record: dict[str, object] = {
                "split": split,
                "method": cell["method"].strip(),
                "mode": cell["model"].strip(),
                "language": cell["mode"].strip(),
                "timestamp": cell["timestamp"].strip(),
            }
            for col, short in names.items():
                record[short] = _parse_metric(path, row, line, col, cell[col])
            records.append(record)
    return pd.DataFrame(records, columns=[*KEY_COLUMNS, *names.values()])


# ----------------------------------------------------------------------------------------------
# means over stories, from the long scores table


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


def _as_key(v: object) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return str(v).strip()


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
