"""The stand-in leaderboard: metric rows that are not the task's paper columns.

Real-weight stand-ins (``bertscore_minilm``, ``image_sim_effnet``, ``speech_meta_fw_pya``, ...)
have their own evaluator names, so :func:`~omnistory_report.analysis.cube.build_cube` keeps their
rows out of the paper leaderboard; without this table they would appear nowhere in the report.
They are shown apart, under a title that says they are not the paper's checkpoints, one column
per (evaluator, criterion) named with the backend that produced it, so that nobody reads a MiniLM
BERTScore as a roberta-large one.

The policies are the paper table's: valid-only divides the sum of ``ok`` scores by the ``ok``
examples; zero-filled divides the same sum by the examples that got a row other than ``error``
(a missing output counts 0, an evaluator that could not answer is left out of both).  The
criteria of the paper metric that a stand-in does not score (``emotion`` of ``speech_meta``) get a
column that says "not scored" instead of a number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from omnistory_core.builtin.omnistorybench import OMNISTORYBENCH

TITLE = "Stand-in metrics with real weights (not the paper's checkpoints)"
NOT_SCORED = "not scored"
#: evaluators of the task's paper columns (their rows feed the paper leaderboard)
PAPER_EVALUATORS: frozenset[str] = frozenset(
    c.evaluator for c in OMNISTORYBENCH.aggregation.columns
)
#: non-paper metrics that have a report section of their own (Table 8: DreamSim correlations)
OWN_SECTIONS: frozenset[str] = frozenset({"dreamsim"})
#: the criteria each paper metric scores, for the "not scored" columns of its stand-ins
PAPER_CRITERIA: dict[str, tuple[str, ...]] = {
    "bertscore": ("f1",),
    "clip": ("cosine",),
    "speech_meta": ("emotion", "speed", "pitch", "gender"),
}


@dataclass(frozen=True)
class StandInColumn:
    """One column of the stand-in table."""

    evaluator: str
    criterion: str
    backend: str
    paper_metric: str | None
    scored: bool = True

    @property
    def label(self) -> str:
        """The column header: evaluator/criterion and the backend that produced it."""
        return f"{self.evaluator}/{self.criterion} [{self.backend}]"


#: what :func:`describe_metric` gives: (backend: one string or criterion -> model, paper_metric)
Description = tuple[str | dict[str, str] | None, str | None]
UNRECORDED = "backend not recorded"


def describe_metric(name: str) -> Description:
    """(backend, paper_metric) of the registered metric ``name``, from its class attributes
    (``backend``: a string or a mapping criterion -> model; ``paper_metric``: the paper metric
    it stands in for); (None, None) when the metric is not installed here."""
    try:
        from omnistory_core.plugins import load_plugins

        cls = load_plugins().components.get(("metric", name))
    except Exception:  # noqa: BLE001 - a broken plugin must not break the report
        cls = None
    if cls is None:
        return None, None
    backend = getattr(cls, "backend", None)
    paper = getattr(cls, "paper_metric", None)
    if isinstance(backend, dict):
        backend = {str(k): str(v) for k, v in backend.items()}
    elif backend:
        backend = str(backend)
    return backend or None, (str(paper) if paper else None)


#: the entry of a per-model backend mapping that decides a criterion named otherwise (the
#: speaking rate is words per second from the ASR's word timestamps)
CRITERION_MODEL: dict[str, str] = {"speed": "asr"}
#: the header's backend of a paper criterion that a stand-in does not score
UNPREDICTED = "no model: not predicted"


def _backend_of(backend: str | dict[str, str] | None, criterion: str) -> str:
    """The model behind one criterion: its own entry of a per-criterion (or per-model) mapping,
    else all of the mapping."""
    if isinstance(backend, dict):
        return (
            backend.get(criterion)
            or backend.get(CRITERION_MODEL.get(criterion, ""))
            or "; ".join(f"{k}: {v}" for k, v in backend.items())
        )
    return backend or UNRECORDED


def stand_in_columns(
    frame: pd.DataFrame,
    describe: Callable[[str], Description] = describe_metric,
) -> list[StandInColumn]:
    """The table's columns, in evaluator then criterion order, from the metric rows of
    ``frame`` whose evaluator is neither a paper column nor one with its own section."""
    if frame.empty:
        return []
    metrics = frame[frame["kind"] == "metric"]
    names = sorted(
        {str(e) for e in metrics["evaluator"].unique()} - PAPER_EVALUATORS - OWN_SECTIONS
    )
    columns: list[StandInColumn] = []
    for name in names:
        backend, paper = describe(name)
        mine = metrics[metrics["evaluator"] == name]
        criteria = sorted({str(c) for c in mine["criterion"].unique()})
        for criterion in criteria:
            columns.append(StandInColumn(name, criterion, _backend_of(backend, criterion), paper))
        for criterion in PAPER_CRITERIA.get(paper or "", ()):
            if criterion not in criteria:
                columns.append(StandInColumn(name, criterion, UNPREDICTED, paper, False))
    return columns


def stand_in_leaderboard(
    frame: pd.DataFrame,
    describe: Callable[[str], Description] = describe_metric,
) -> tuple[pd.DataFrame, list[StandInColumn]]:
    """(table, columns): one row per system, ``n_examples`` and, per column, the valid-only
    mean (``<label>``) and the zero-filled mean (``<label> (0)``); "not scored" columns hold
    the string :data:`NOT_SCORED`.  Rows are sorted by the mean of the valid-only columns (best
    first, ties by name); an empty table when there is no stand-in row."""
    columns = stand_in_columns(frame, describe)
    if not columns:
        return pd.DataFrame(), []
    frame = frame[frame["kind"] != "human"]
    systems = sorted(str(s) for s in frame["system"].unique())
    n_examples = frame.groupby("system", observed=True)["example_id"].nunique()
    data: dict[str, Any] = {
        "system": systems,
        "n_examples": [int(n_examples.get(s, 0)) for s in systems],
    }
    valid_cols: list[str] = []
    for col in columns:
        if not col.scored:
            data[col.label] = [NOT_SCORED] * len(systems)
            continue
        rows = frame[
            (frame["kind"] == "metric")
            & (frame["evaluator"] == col.evaluator)
            & (frame["criterion"] == col.criterion)
        ]
        valid, zero = [], []
        for system in systems:
            mine = rows[rows["system"] == system]
            ok = mine[mine["status"] == "ok"]
            # one value per example (a run-scope row has its own example id)
            total = float(ok["score"].astype(float).sum())
            n_ok = int(ok["example_id"].nunique())
            n_scored = int(mine[mine["status"] != "error"]["example_id"].nunique())
            valid.append(total / n_ok if n_ok else np.nan)
            zero.append(total / n_scored if n_scored else np.nan)
        data[col.label] = valid
        data[f"{col.label} (0)"] = zero
        valid_cols.append(col.label)
    table = pd.DataFrame(data)
    key = table[valid_cols].astype(float).mean(axis=1, skipna=True).fillna(-np.inf)
    order = np.lexsort((table["system"].to_numpy(), -key.to_numpy()))
    return table.iloc[order].reset_index(drop=True), columns


__all__ = [
    "NOT_SCORED",
    "Description",
    "PAPER_EVALUATORS",
    "TITLE",
    "StandInColumn",
    "describe_metric",
    "stand_in_columns",
    "stand_in_leaderboard",
]
