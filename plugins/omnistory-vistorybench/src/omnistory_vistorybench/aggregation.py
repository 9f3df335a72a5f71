"""Our scored runs through the official aggregation: scores rows -> story values -> one run table
per policy -> the official leaderboard, beside the published runs.

Every scored system is one run (``<method>/<mode>/<lang>/<timestamp>``, see
:func:`omnistory_vistorybench.evaluation.run_label`); :class:`RunInfo` says where it lies (from
the evaluation's ``systems.json``, else the job manifests, else the label itself).  Its shot rows
are averaged per story, its story rows are story values, its run rows dataset-level values; each
run gives one row per split it is ranked on (its own split, and for a full run its lite stories
too), and the leaderboard averages the runs of a (method, mode) over languages and timestamps,
picks each method's best mode and ranks lite and full separately
(:func:`omnistory_vistorybench.leaderboard.official_leaderboard`): the path the published runs
take, so our methods land among them.

A category that no ranked row of a split has a value for (prompt alignment scored by nobody) is
ranked as the official ranks it (every row tied), and shown as not scored: its rank cell is
empty in the CSVs and says so on the page (:func:`mark_not_scored`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from omnistory_vistorybench import dataset as vistory
from omnistory_vistorybench import leaderboard as lb

POLICIES: tuple[str, ...] = ("official", "valid_only", "zero_filled")
#: the paper's names of the 12 metrics (and of the Alignment Score, the prompt-alignment mean),
#: by the official story-level key the scores and the official CSVs use
PAPER_NAMES: dict[str, str] = {
    "cids_cross_mean": "CIDS Cross",
    "cids_self_mean": "CIDS Self",
    "cross_csd": "CSD Cross",
    "self_csd": "CSD Self",
    "scene": "Scene",
    "camera": "Shot",
    "character_action": "Character Interaction",
    "single_character_action": "Individual Action",
    "occm": "OCCM",
    "copy_paste_score": "Copy-Paste Rate",
    "aesthetic_score": "Aesthetics",
    "inception_score": "Inception Score",
    "prompt_align_avg": "Alignment Score",
}
PUBLISHED = "published"
OURS = "ours"
#: the file ``evaluate`` writes beside the scores (``omnistory_eval.run_info``)
SYSTEMS_FILE = "systems.json"
DEFAULT_MODE = "base"


@dataclass(frozen=True)
class RunInfo:
    """Where one scored system's run lies: its official levels, split and stories (None:
    every story the run has rows for)."""

    system: str
    method: str
    mode: str
    language: str
    timestamp: str
    split: str
    story_ids: tuple[str, ...] | None = None


def recorded_systems(*folders: Path | None) -> dict[str, dict[str, Any]]:
    """The systems an evaluation recorded (``systems.json`` in any of ``folders``)."""
    found: dict[str, dict[str, Any]] = {}
    for folder in folders:
        if folder is None:
            continue
        try:
            data = json.loads((Path(folder) / SYSTEMS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        systems = data.get("systems") if isinstance(data, dict) else None
        for name, info in (systems or {}).items():
            if isinstance(info, dict):
                found.setdefault(str(name), info)
    return found


def run_infos(
    systems: Iterable[str],
    recorded: Mapping[str, Mapping[str, Any]],
    jobs: Mapping[str, Any],
) -> dict[str, RunInfo]:
    """Each system's :class:`RunInfo`: what the evaluation recorded, else its job directory's
    manifest (``jobs``: label -> ``report.JobRun``; a bare method name, as scores written
    before runs were labelled had it, is that method's only job), else read from its label
    (``method/mode/lang/timestamp``; a bare name is the method, mode ``base``, ``en``)."""
    out: dict[str, RunInfo] = {}
    methods: dict[str, list[Any]] = {}
    for candidate in jobs.values():
        methods.setdefault(candidate.method, []).append(candidate)
    for system in dict.fromkeys(systems):
        info = recorded.get(system)
        job = jobs.get(system)
        if job is None and len(methods.get(system, [])) == 1:
            # scores written when a job's system was its method's name (its only run)
            job = methods[system][0]
        if info is not None:
            ids = info.get("story_ids")
            out[system] = RunInfo(
                system,
                str(info.get("method") or system),
                str(info.get("mode") or DEFAULT_MODE),
                str(info.get("language") or "en"),
                str(info.get("timestamp") or ""),
                str(info.get("split") or "full"),
                tuple(str(s) for s in ids) if isinstance(ids, list) and ids else None,
            )
        elif job is not None:
            ids = job.story_ids
            out[system] = RunInfo(
                system,
                job.method,
                job.mode,
                job.language,
                job.timestamp,
                job.split,
                tuple(ids) if ids is not None else None,
            )
        else:
            parts = system.split("/")
            if len(parts) == 4:
                out[system] = RunInfo(system, *parts, split="full")
            else:
                out[system] = RunInfo(system, system, DEFAULT_MODE, "en", "", lb.DEFAULT_SPLIT)
    return out


# -- scores -> story values ---------------------------------------------------------------------


def story_of(line: Any) -> str:
    """The story a row belongs to: a shot id ``"<story>_<NN>"``'s prefix, a group row's id, ``""``
    for a run row."""
    if line.scope == "item":
        story, sep, _ = line.example_id.rpartition("_")
        return story if sep else line.example_id
    return line.example_id if line.scope == "group" else ""


def split_of(line: Any) -> str:
    """The split a run row was computed over: its ``example_id`` (``"lite"``: the run's lite
    stories; ``""``: the whole run); ``""`` for item and group rows."""
    return line.example_id if line.scope == "run" else ""


VALUE_COLUMNS = (
    "system",
    "method",
    "mode",
    "language",
    "timestamp",
    "story_id",
    "metric",
    "valid",
    "valid_status",
    "zero",
    "zero_status",
    "n_shots",
    "split",
)


def story_values(lines: Sequence[Any], infos: Mapping[str, RunInfo]) -> pd.DataFrame:
    """One row per (system, story, metric): the story's value under the official/valid-only
    reading (``valid``, the mean of its ``ok`` shots) and the zero-filled one (``zero``, every
    shot without a value counting 0), with the status each reading gives the story, and the
    run's official levels.  Run rows pass through with an empty ``story_id``.  A group row is
    the story's value; item rows of the same (system, story, metric) are then not averaged.
    ``split`` is a run row's ``example_id``, the split it was computed over (``""``: the whole
    run; and on every story row)."""
    items: dict[tuple[str, str, str, str], list[Any]] = {}
    direct: dict[tuple[str, str, str, str], Any] = {}
    for line in lines:
        key = (line.system, story_of(line), line.metric, split_of(line))
        if line.scope == "item":
            items.setdefault(key, []).append(line)
        else:
            direct[key] = line
    records = []
    for key, line in direct.items():
        records.append(_record(key, infos, line.score, line.status, line.score, line.status))
    for key, shots in items.items():
        if key not in direct:
            records.append(_record(key, infos, *_shot_aggregate(shots)))
    return pd.DataFrame(records, columns=list(VALUE_COLUMNS))


def _record(
    key: tuple[str, str, str, str],
    infos: Mapping[str, RunInfo],
    valid: float | None,
    valid_status: str,
    zero: float | None,
    zero_status: str,
    n_shots: int = 0,
) -> dict[str, Any]:
    info = infos[key[0]]
    return {
        "system": key[0],
        "method": info.method,
        "mode": info.mode,
        "language": info.language,
        "timestamp": info.timestamp,
        "story_id": key[1],
        "metric": key[2],
        "valid": math.nan if valid is None else valid,
        "valid_status": valid_status,
        "zero": math.nan if zero is None else zero,
        "zero_status": zero_status,
        "n_shots": n_shots,
        "split": key[3],
    }


def _shot_aggregate(shots: Sequence[Any]) -> tuple[float | None, str, float | None, str, int]:
    """A story's value from its shots, as the official per-story mean: (valid, its status, zero,
    its status, number of shots).  ``error`` shots are left out of both means."""
    ok = [s.score for s in shots if s.status == "ok" and s.score is not None]
    unscored = [s.status for s in shots if s.status in ("missing_output", "invalid")]
    counted = len(ok) + len(unscored)
    if ok:
        valid, valid_status = sum(ok) / len(ok), "ok"
    elif unscored:
        valid = None
        valid_status = "missing_output" if "missing_output" in unscored else "invalid"
    else:
        valid, valid_status = None, "error"
    if counted:
        zero, zero_status = sum(ok) / counted, "ok"
    else:
        zero, zero_status = None, "error"
    return valid, valid_status, zero, zero_status, len(shots)


# -- story values -> run tables -----------------------------------------------------------------


def run_splits(info: RunInfo | None) -> dict[str, list[str] | None]:
    """The splits a run is ranked on and their stories: its own split and, for a full run, the
    lite stories it holds."""
    if info is None:
        return {lb.DEFAULT_SPLIT: None}
    ids = list(info.story_ids) if info.story_ids is not None else None
    splits: dict[str, list[str] | None] = {info.split: ids}
    if info.split == "full" and ids is not None:
        lite = [s for s in ids if s in vistory.LITE_STORY_IDS]
        if lite:
            splits["lite"] = lite
    return splits


def our_run_tables(
    values: pd.DataFrame, infos: Mapping[str, RunInfo], notes: list[str] | None = None
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """Per policy, our run table (one row per run and split: what
    :func:`leaderboard.official_leaderboard` ranks); and the long means table (per run, split
    and metric: the three policies and the counts).  Each split of a run reads the run rows
    computed over it (:func:`split_run_rows`); ``notes`` collects where a split took the whole
    run's value instead."""
    tables: dict[str, list[pd.DataFrame]] = {p: [] for p in POLICIES}
    means: list[pd.DataFrame] = []
    for system, part in values.groupby("system", sort=False):
        info = infos.get(str(system))
        splits = run_splits(info)
        own = info.split if info is not None else lb.DEFAULT_SPLIT
        part = split_run_rows(part, splits, own, notes)
        valid = _long(part, "valid")
        zero = _long(part, "zero")
        for policy in POLICIES:
            source = zero if policy == "zero_filled" else valid
            tables[policy].append(lb.run_means(source, splits=splits, policy=policy))
        for split, ids in splits.items():
            base = lb.story_means(valid, ids, split=split)
            filled = lb.story_means(zero, ids, split=split)
            base["zero_filled"] = filled["zero_filled"].to_numpy()
            base.insert(0, "split", split)
            base.insert(1, "system", str(system))
            means.append(base)
    out = {
        p: pd.concat(t, ignore_index=True) if t else pd.DataFrame(columns=list(lb.KEY_COLUMNS))
        for p, t in tables.items()
    }
    long = pd.concat(means, ignore_index=True) if means else pd.DataFrame()
    return out, long


def split_run_rows(
    values: pd.DataFrame,
    splits: Iterable[str],
    own: str,
    notes: list[str] | None = None,
) -> pd.DataFrame:
    """One run's story values with each run row labelled by the split it is ranked on: per
    split and metric the run row computed over that split, else the whole run's (``split``
    ``""``), so that a split sees one run row per metric.  Story rows keep ``""`` (every split);
    run rows of a split the run is not ranked on are dropped.  A split other than ``own`` that
    takes the whole run's value adds a line to ``notes``."""
    is_run = values["story_id"] == ""
    whole = values[is_run & (values["split"] == "")]
    parts = [values[~is_run]]
    for split in splits:
        computed = values[is_run & (values["split"] == split)]
        fallback = whole[~whole["metric"].isin(set(computed["metric"]))]
        if split != own and len(fallback) and notes is not None:
            notes.append(
                f"{values['system'].iloc[0]}: {', '.join(fallback['metric'])} on split {split} is"
                f" the whole run's value (the scores have no run row {split!r}; evaluate the run"
                " again to compute it over that split)"
            )
        parts.extend([computed.assign(split=split), fallback.assign(split=split)])
    return pd.concat(parts, ignore_index=True)


def _long(values: pd.DataFrame, reading: str) -> pd.DataFrame:
    columns = ["method", "mode", "language", "timestamp", "story_id", "split", "metric"]
    frame = values[columns].copy()
    frame["value"] = values[reading].to_numpy()
    frame["status"] = values[f"{reading}_status"].to_numpy()
    return frame


# -- the leaderboards ---------------------------------------------------------------------------


def roster(option: str, published: pd.DataFrame | None, ours: Iterable[str]) -> dict[str, str]:
    """method -> group label of every method to rank (ours always, labelled ``""`` unless the
    official roster names them)."""
    ranked: dict[str, str] = {}
    if published is not None:
        for method in dict.fromkeys(published["method"]):
            if option == "all" or method in lb.OFFICIAL_GROUPS:
                ranked[method] = lb.OFFICIAL_GROUPS.get(method, "")
    for method in ours:
        ranked[method] = lb.OFFICIAL_GROUPS.get(method, "")
    return ranked


def rename_ours(table: pd.DataFrame, ranked: Iterable[str]) -> dict[str, str]:
    """Our method -> the name it ranks under: ``"<method> (ours)"`` when a ranked published
    method has the same name (their means would otherwise be averaged together)."""
    names = set(ranked)
    return {m: f"{m} ({OURS})" if m in names else m for m in dict.fromkeys(table["method"])}


def leaderboards(
    ours: Mapping[str, pd.DataFrame] | None,
    published: pd.DataFrame | None,
    option: str,
    faithful: bool,
) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """Per policy, the official leaderboard of our runs and the published ones together, and
    our method -> the name it is ranked under.  With both present a ``source`` column says which
    rows are ``published`` and which ``ours``.  The published numbers are the official
    policy's; they sit unchanged beside ours under each."""
    policies = POLICIES if ours is not None else ("official",)
    boards: dict[str, pd.DataFrame] = {}
    renamed: dict[str, str] = {}
    for policy in policies:
        parts = []
        our_names: set[str] = set()
        ranked_published = roster(option, published, ())
        if ours is not None and not ours[policy].empty:
            mine = ours[policy].copy()
            renamed = rename_ours(mine, ranked_published)
            mine["method"] = mine["method"].map(renamed)
            our_names = set(renamed.values())
            parts.append(mine)
        if published is not None:
            parts.append(published)
        table = (
            pd.concat(parts, ignore_index=True)
            if parts
            else pd.DataFrame(columns=list(lb.KEY_COLUMNS))
        )
        groups = roster(option, published, our_names)
        board = lb.official_leaderboard(table, groups=groups, faithful=faithful)
        if ours is not None and published is not None:
            board["source"] = [OURS if m in our_names else PUBLISHED for m in board["model"]]
        boards[policy] = mark_not_scored(board)
    return boards, renamed


def not_scored(board: pd.DataFrame) -> dict[str, list[str]]:
    """Per split, the categories no row of the board has any value for."""
    out: dict[str, list[str]] = {}
    for split, part in board.groupby("split", sort=False):
        missing = [
            category
            for category, subs in lb.CATEGORIES.items()
            if all(
                pd.to_numeric(part.get(m, pd.Series(dtype=float)), errors="coerce").isna().all()
                for m in subs
            )
        ]
        if missing:
            out[str(split)] = missing
    return out


def mark_not_scored(board: pd.DataFrame) -> pd.DataFrame:
    """The board with the rank of each category nobody scored in a split left empty (the
    official ties every row there: rank 1 for all, which would read as a result).  The overall
    rank keeps the official computation.  Rank columns become nullable integers."""
    board = board.copy()
    headers = [*lb.CATEGORY_HEADERS.values(), "overall_rank"]
    for header in headers:
        if header in board.columns:
            board[header] = pd.to_numeric(board[header], errors="coerce").astype("Int64")
    for split, categories in not_scored(board).items():
        rows = board["split"] == split
        for category in categories:
            board.loc[rows, lb.CATEGORY_HEADERS[category]] = pd.NA
    return board


def left_out(published: pd.DataFrame | None, option: str) -> list[str]:
    """The published methods the official roster does not rank (``roster=official``)."""
    if published is None or option == "all":
        return []
    return sorted({m for m in published["method"] if m not in lb.OFFICIAL_GROUPS})


__all__ = [
    "PAPER_NAMES",
    "POLICIES",
    "RunInfo",
    "leaderboards",
    "left_out",
    "mark_not_scored",
    "not_scored",
    "our_run_tables",
    "recorded_systems",
    "rename_ours",
    "roster",
    "run_infos",
    "run_splits",
    "split_run_rows",
    "story_values",
]
