"""What the report's tables are made from, each input loaded the first time a table asks for it.

A :class:`Context` holds the paths a report is built from and reads, once and only when needed,
the scores table (frame, cube, leaderboard, human ratings), the run directory (paradigms, oracle
flags, failures, narration lengths) and the dataset examples.  The statistics and paper tables
are made on demand and kept, so a table that another one builds on (Table 2 is the
``bottleneck_valid`` statistics table) is computed once.  :data:`NEEDS` names these inputs; a
table of :mod:`omnistory_report.registry` declares the ones it cannot do without.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from omnistory_report.analysis.cube import ScoreCube
from omnistory_report.analysis.human import HumanStudy
from omnistory_report.analysis.paper_tables import (
    EXTRA_MAKERS,
    PaperInputs,
    TableOrReason,
    paper_table,
)
from omnistory_report.analysis.statistics import (
    STATISTICS,
    StatisticsInputs,
    StatisticsOptions,
    StatTable,
    statistic,
)
from omnistory_report.rundir import SystemRun

#: what a table can need, in the order the index looks up the reason an absent one gives
NEEDS: tuple[str, ...] = ("scores", "human", "run_dir", "examples")


def load_examples(runs: Mapping[str, SystemRun]) -> list | None:
    """Dataset examples for the per-example pages, via the ``dataset`` spec of a manifest.

    Returns None (pages then show outputs and scores only) when no manifest names a dataset.
    """
    specs = [spec for r in runs.values() if (spec := r.manifest.get("dataset"))]
    if not specs:
        return None
    from omnistory_core.data import load_dataset  # imported lazily: optional for the report

    return list(load_dataset(specs[0]))


def add_note(table: StatTable, note: str) -> StatTable:
    """``table`` with ``note`` as a paragraph of its own after its note (once)."""
    if not note or note in table.note:
        return table
    return replace(table, note=f"{table.note}\n\n{note}" if table.note else note)


class _Statistics(Mapping[str, StatTable]):
    """The context's statistics tables as a mapping, each made when first looked up."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def __getitem__(self, key: str) -> StatTable:
        table = self._ctx.stat(key) if key in STATISTICS else None
        if table is None:
            raise KeyError(key)
        return table

    def __iter__(self) -> Iterator[str]:
        return (k for k in STATISTICS if self._ctx.stat(k) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(eq=False)
class Context:
    """The inputs of one report.  ``examples`` given here replace those a manifest names."""

    scores_path: Path
    out_dir: Path
    run_dir: Path | None = None
    given_examples: Sequence[Any] | None = None
    options: StatisticsOptions = field(default_factory=StatisticsOptions)
    _stats: dict[str, StatTable | None] = field(default_factory=dict, init=False, repr=False)
    _paper: dict[int, TableOrReason] = field(default_factory=dict, init=False, repr=False)
    _extra: dict[str, StatTable | None] = field(default_factory=dict, init=False, repr=False)

    @property
    def tables_dir(self) -> Path:
        return self.out_dir / "tables"

    @property
    def fig_dir(self) -> Path:
        return self.out_dir / "figures"

    def has(self, need: str) -> bool:
        """Whether the input ``need`` (one of :data:`NEEDS`) is there; loads it to find out."""
        if need == "scores":  # a missing scores file reads as an empty table
            return True
        if need == "human":
            return self.human is not None and not self.human.frame.empty
        if need == "run_dir":
            return bool(self.runs)
        if need == "examples":
            return bool(self.examples)
        raise ValueError(f"unknown need {need!r}; known: {', '.join(NEEDS)}")

    # the scores table

    @cached_property
    def _scores(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        from omnistory_report.analysis.frame import frame_from_rows, load_scores_frame
        from omnistory_report.analysis.human import split_human

        if self.scores_path.is_file() or self.run_dir is None:
            frame = load_scores_frame(self.scores_path)
        else:  # a sweep run without evaluation: the pages still show every system's outputs
            frame = frame_from_rows([])
        # human ratings (``human import``) feed Tables 18-21 only, never the leaderboard
        return split_human(frame)

    @cached_property
    def frame(self) -> pd.DataFrame:
        return self._scores[0]

    @cached_property
    def human(self) -> HumanStudy | None:
        from omnistory_report.analysis.human import read_plan_sidecar

        rows = self._scores[1]
        return HumanStudy(rows, read_plan_sidecar(self.scores_path)) if not rows.empty else None

    @cached_property
    def cube(self) -> ScoreCube:
        from omnistory_report.analysis.cube import build_cube

        return build_cube(self.frame, source=str(self.scores_path))

    @cached_property
    def lb(self) -> pd.DataFrame:
        from omnistory_report.analysis.leaderboard import leaderboard

        return leaderboard(self.cube)

    @cached_property
    def n_error(self) -> int:
        """(system, example) pairs with an evaluator error."""
        return int(self.cube.errors.any(axis=0).sum())

    @cached_property
    def incomplete(self) -> str:
        """The note on evaluator errors every table computed from the scores carries."""
        if not self.n_error:
            return ""
        return (
            f"Incomplete: {self.n_error} (system, example) pair(s) have evaluator errors (status "
            "`error`: the evaluator could not answer); the affected cells are computed without "
            "them, neither as valid nor as zero (see `errors_*` in the leaderboard and `n_error` "
            "in judge_coverage). Rerun `evaluate` once the cause is fixed."
        )

    # the run directory and the dataset

    @cached_property
    def runs(self) -> dict[str, SystemRun]:
        from omnistory_report.rundir import read_run_dir

        return read_run_dir(self.run_dir) if self.run_dir is not None else {}

    @cached_property
    def unscored(self) -> list[str]:
        return sorted(set(self.runs) - set(self.cube.systems))

    @cached_property
    def info(self) -> pd.DataFrame:
        """Paradigm and oracle flag per system, scored or not."""
        from omnistory_report.rundir import system_info

        return system_info(self.runs, list(self.cube.systems) + self.unscored)

    @cached_property
    def paradigms(self) -> dict[str, str] | None:
        known = {s: p for s, p in self.info["paradigm"].items() if p != "unknown"}
        return known or None

    @cached_property
    def oracles(self) -> list[str]:
        return sorted(s for s, o in self.info["oracle"].items() if o)

    @cached_property
    def comparable(self) -> pd.DataFrame:
        """The leaderboard without the oracle systems."""
        return self.lb[~self.lb["system"].isin(self.oracles)]

    @cached_property
    def failures(self) -> pd.DataFrame:
        from omnistory_report.rundir import failures_frame

        return failures_frame(self.runs) if self.runs else pd.DataFrame()

    @cached_property
    def plan_errors(self) -> pd.Series | None:
        from omnistory_report.analysis.failures import plan_error_counts

        return plan_error_counts(self.failures) if self.runs else None

    @cached_property
    def lengths(self) -> pd.DataFrame | None:
        from omnistory_report.rundir import lengths_frame

        return lengths_frame(self.runs) if self.runs else None

    @cached_property
    def produced(self) -> pd.DataFrame:
        from omnistory_report.rundir import outputs_frame

        return outputs_frame(self.runs)

    @cached_property
    def _examples(self) -> tuple[Sequence[Any] | None, str]:
        if self.given_examples is not None or not self.runs:
            return self.given_examples, ""
        try:
            return load_examples(self.runs), ""
        except Exception as exc:  # noqa: BLE001 - the report must still build without the dataset
            return None, f"Dataset examples could not be loaded ({exc}); pages show outputs only."

    @property
    def examples(self) -> Sequence[Any] | None:
        return self._examples[0]

    @cached_property
    def reference_lengths(self) -> list[int] | None:
        """The references' narration lengths, shown next to generated ones (when there are)."""
        if self.lengths is None or self.lengths.empty or not self.examples:
            return None
        from omnistory_report.analysis.length import narration_length

        return [narration_length(e.reference.next_page.text) for e in self.examples]

    @property
    def notes(self) -> list[str]:
        """The report page's notes: unscored systems, a dataset that failed to load, errors."""
        notes = []
        if self.unscored and self.cube.systems:
            notes.append(
                f"Systems in the run directory without scores yet: {', '.join(self.unscored)}."
            )
        if self._examples[1]:
            notes.append(self._examples[1])
        if self.incomplete:
            notes.append(self.incomplete)
        return notes

    # the tables several others build on, made once

    @cached_property
    def statistics_inputs(self) -> StatisticsInputs:
        return StatisticsInputs(
            self.frame,
            self.cube,
            self.lb,
            self.paradigms,
            self.lengths,
            self.reference_lengths,
            self.options,
            exclude=self.oracles,
        )

    def stat(self, stem: str) -> StatTable | None:
        """Statistics table ``stem`` with the note on evaluator errors (None: not made)."""
        if stem not in self._stats:
            table = statistic(stem, self.statistics_inputs)
            self._stats[stem] = add_note(table, self.incomplete) if table is not None else None
        return self._stats[stem]

    @cached_property
    def paper_inputs(self) -> PaperInputs:
        return PaperInputs(
            self.frame,
            self.cube,
            self.lb,
            _Statistics(self),
            self.paradigms,
            self.lengths,
            exclude=self.oracles,
            human=self.human,
        )

    def paper_table(self, number: int) -> TableOrReason:
        """Paper table ``number``, or why it is absent."""
        if number not in self._paper:
            self._paper[number] = paper_table(number, self.paper_inputs)
        return self._paper[number]

    def paper_extra(self, stem: str) -> StatTable | None:
        """One of the tables written with the paper's (None: not made)."""
        if stem not in self._extra:
            self._extra[stem] = EXTRA_MAKERS[stem](self.paper_inputs)
        return self._extra[stem]
