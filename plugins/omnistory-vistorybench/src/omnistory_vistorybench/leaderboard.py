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

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

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


def _as_key(v: object) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return str(v).strip()
