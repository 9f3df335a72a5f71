"""Per-example score matrices: the one intermediate every aggregation is computed from.

A *cell* is one automatic metric or one (track, judge) pair — the unit whose valid examples form a
denominator in Appendix E.5 / F.7.  For every cell, system and example the cube holds

* ``values``: the per-example score — the metric value (BERTScore F1, CLIP cosine), the mean of the
  four speech-metadata field matches, or the mean of the judge's four criterion scores — and 0 where
  the example is not valid;
* ``valid``: every required criterion row is present with status ``ok`` (E.5: "four valid
  criterion scores"; E.2: "records without valid extracted metadata are excluded");
* ``has_rows``: at least one row with an outcome exists (a judge with rows but no valid example is
  *reported*; a judge with no rows for a system has simply not been run on it, e.g. in a partial
  sweep);
* ``error``: the cell has ``error`` rows for the example — its evaluator could not answer (server
  down, weights missing, ...).  Such an example is neither valid nor a zero: it is left out of the
  cell's denominators under both policies, and the cell is reported as incomplete.

Leaderboard, bootstrap, agreement and diagnostics are all pure functions of this cube, which makes
the bootstrap a handful of matrix products instead of a Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from omnistory_core.builtin.omnistorybench import CRITERIA, METRIC_CELLS, OUTPUT_TRACKS
from omnistory_report.analysis.frame import category_codes, check_unique_keys, column_values

# the Omni-StoryBench task declares its tracks, metric cells and output modalities
MODALITY_TRACKS: tuple[str, ...] = OUTPUT_TRACKS
RUBRIC_SIZE = len(next(iter(CRITERIA.values())))
JUDGE_TRACKS: tuple[str, ...] = tuple(CRITERIA)
# evaluator: (track, criteria that must all be ok for the example to be valid)
METRICS: dict[str, tuple[str, tuple[str, ...]]] = METRIC_CELLS


@dataclass(frozen=True)
class Cell:
    """One automatic metric or one judge of one track."""

    kind: str
    track: str
    evaluator: str
    criteria: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.evaluator if self.kind == "metric" else f"{self.track}:{self.evaluator}"


@dataclass(frozen=True)
class ScoreCube:
    """Dense (cell, system, example) arrays built from a scores DataFrame."""

    systems: tuple[str, ...]
    examples: tuple[str, ...]
    cells: tuple[Cell, ...]
    values: np.ndarray
    valid: np.ndarray
    has_rows: np.ndarray
    present: np.ndarray
    missing: np.ndarray
    judge_criteria: dict[str, tuple[str, ...]] = field(default_factory=dict)
    error: np.ndarray | None = None  # (cell, system, example); None: no error row anywhere

    @property
    def errors(self) -> np.ndarray:
        """(cell, system, example) bool: the evaluator could not answer (``error`` rows)."""
        if self.error is None:
            return np.zeros(self.values.shape, dtype=bool)
        return self.error

    @property
    def scored(self) -> np.ndarray:
        """(cell, system, example) bool: the zero-filled denominator — examples of the system
        whose cell outcome is known (every example of the system except the ``error`` ones)."""
        return self.present[None, :, :] & ~self.errors

    def metric_index(self, evaluator: str) -> int | None:
        """Index of a metric cell, or None when the table has no row for that metric."""
        for k, cell in enumerate(self.cells):
            if cell.kind == "metric" and cell.evaluator == evaluator:
                return k
        return None

    def judge_indices(self, track: str) -> list[int]:
        """Indices of the judge cells of a track, in order of first appearance in the table."""
        return [k for k, c in enumerate(self.cells) if c.kind == "judge" and c.track == track]

    @property
    def n_examples(self) -> np.ndarray:
        """Examples per system: the zero-filled denominator (distinct examples with any row)."""
        return self.present.sum(axis=1)


def build_cube(frame: pd.DataFrame, source: str = "scores table") -> ScoreCube:
    """Build the cube from a scores DataFrame (see :mod:`omnistory_report.analysis.frame`).

    Rows of unknown metric evaluators or criteria (e.g. a supplementary DreamSim plugin) are kept
    out of the cube; they never enter the leaderboard.
    """
    if (frame["kind"] == "human").any():  # human ratings feed Tables 18-21, never a cell
        frame = frame[frame["kind"] != "human"]
    check_unique_keys(frame, source)
    systems = tuple(sorted(map(str, frame["system"].unique())))
    examples = tuple(sorted(map(str, frame["example_id"].unique())))
    n_sys, n_ex = len(systems), len(examples)
    s_code = category_codes(frame["system"], systems)
    e_code = category_codes(frame["example_id"], examples)

    cells, row_cell = _assign_cells(frame, source)
    n_cells = len(cells)
    status = column_values(frame["status"])
    score = frame["score"].to_numpy(dtype=np.float64)

    present = np.zeros(n_sys * n_ex, dtype=bool)
    present[s_code * n_ex + e_code] = True

    keep = row_cell >= 0
    flat = (row_cell[keep] * n_sys + s_code[keep]) * n_ex + e_code[keep]
    size = n_cells * n_sys * n_ex
    is_error = status[keep] == "error"
    n_rows = np.bincount(flat[~is_error], minlength=size)
    n_error = np.bincount(flat[is_error], minlength=size)
    ok = status[keep] == "ok"
    n_ok = np.bincount(flat[ok], minlength=size)
    sum_ok = np.bincount(flat[ok], weights=score[keep][ok], minlength=size)
    n_req = np.array([len(c.criteria) for c in cells], dtype=np.int64)
    shape = (n_cells, n_sys, n_ex)
    n_ok = n_ok.reshape(shape)
    valid = n_ok == n_req[:, None, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(valid, sum_ok.reshape(shape) / n_req[:, None, None], 0.0)

    missing = np.zeros((len(MODALITY_TRACKS), n_sys * n_ex), dtype=bool)
    is_missing = status[keep] == "missing_output"
    cell_track = np.array([c.track for c in cells], dtype=object)
    for m, track in enumerate(MODALITY_TRACKS):
        in_track = np.isin(row_cell[keep], np.flatnonzero(cell_track == track))
        sel = is_missing & in_track
        missing[m, s_code[keep][sel] * n_ex + e_code[keep][sel]] = True

    judge_criteria = {c.track: c.criteria for c in cells if c.kind == "judge"}
    return ScoreCube(
        systems=systems,
        examples=examples,
        cells=tuple(cells),
        values=values,
        valid=valid,
        has_rows=n_rows.reshape(shape) > 0,
        present=present.reshape(n_sys, n_ex),
        missing=missing.reshape(len(MODALITY_TRACKS), n_sys, n_ex),
        judge_criteria=judge_criteria,
        error=(n_error.reshape(shape) > 0) & ~valid if is_error.any() else None,
    )


def _assign_cells(frame: pd.DataFrame, source: str) -> tuple[list[Cell], np.ndarray]:
    """Map each row to a cell index (-1 for rows outside the leaderboard)."""
    row_cell = np.full(len(frame), -1, dtype=np.int64)
    if frame.empty:
        return [], row_cell
    keys = ["kind", "track", "evaluator"]
    group = frame.groupby(keys, observed=True, sort=False).ngroup().to_numpy()
    first = pd.Series(group).drop_duplicates()
    key_rows = frame.iloc[first.index.to_numpy()][keys].astype(str).to_numpy()  # a few rows
    group_keys = dict(zip(first.to_numpy(), map(tuple, key_rows), strict=True))

    judge_rows = frame.loc[frame["kind"] == "judge", ["track", "criterion"]]
    pairs = judge_rows.drop_duplicates().astype(str)
    criteria_by_track = {
        str(track): tuple(sorted(crit)) for track, crit in pairs.groupby("track")["criterion"]
    }
    for track, criteria in criteria_by_track.items():
        # Validity needs every criterion of the track; a stray key would void every example.
        if len(criteria) > RUBRIC_SIZE:
            raise ValueError(
                f"{source}: judge track {track!r} has {len(criteria)} distinct criteria "
                f"{list(criteria)}; a track has {RUBRIC_SIZE} rubric criteria (Appendix E.5)"
            )

    metric_groups: list[tuple[str, int]] = []
    judge_groups: list[tuple[str, str, int]] = []
    for gid in first.to_numpy():  # in order of first appearance in the table
        kind, track, evaluator = group_keys[gid]
        if kind == "judge":
            judge_groups.append((track, evaluator, gid))
        elif evaluator in METRICS:
            expected_track = METRICS[evaluator][0]
            if track != expected_track:
                raise ValueError(
                    f"{source}: metric {evaluator!r} rows must have track {expected_track!r}, "
                    f"found a row with track {track!r}"
                )
            metric_groups.append((evaluator, gid))

    # Metrics first in paper order, then judges by track (paper order), first appearance within.
    cells: list[Cell] = []
    cell_of: dict[tuple[str, str], int] = {}
    present_metrics = {evaluator for evaluator, _ in metric_groups}
    for evaluator, (track, criteria) in METRICS.items():
        if evaluator in present_metrics:
            cell_of[("metric", evaluator)] = len(cells)
            cells.append(Cell("metric", track, evaluator, criteria))
    for track in JUDGE_TRACKS:
        for t, evaluator, _gid in judge_groups:
            if t == track and (track, evaluator) not in cell_of:
                cell_of[(track, evaluator)] = len(cells)
                cells.append(Cell("judge", track, evaluator, criteria_by_track[track]))

    gid_to_cell = np.full(max(group_keys) + 1, -1, dtype=np.int64)
    for evaluator, gid in metric_groups:
        gid_to_cell[gid] = cell_of[("metric", evaluator)]
    for track, evaluator, gid in judge_groups:
        gid_to_cell[gid] = cell_of[(track, evaluator)]
    row_cell = gid_to_cell[group]

    # Metric rows count only for the metric's own criteria (f1, cosine, the four speech fields).
    is_metric = (row_cell >= 0) & (frame["kind"] == "metric").to_numpy()
    if is_metric.any():
        criterion = column_values(frame["criterion"])
        evaluator = column_values(frame["evaluator"])
        allowed = np.zeros(len(frame), dtype=bool)
        for name, (_track, criteria) in METRICS.items():
            allowed |= (evaluator == name) & np.isin(criterion, criteria)
        row_cell[is_metric & ~allowed] = -1
    return cells, row_cell


def select_systems(cube: ScoreCube, systems: list[str] | tuple[str, ...]) -> ScoreCube:
    """The cube restricted to ``systems`` (kept in the cube's order; unknown names ignored)."""
    wanted = set(systems)
    idx = [i for i, s in enumerate(cube.systems) if s in wanted]
    return ScoreCube(
        systems=tuple(cube.systems[i] for i in idx),
        examples=cube.examples,
        cells=cube.cells,
        values=cube.values[:, idx, :],
        valid=cube.valid[:, idx, :],
        has_rows=cube.has_rows[:, idx, :],
        present=cube.present[idx, :],
        missing=cube.missing[:, idx, :],
        judge_criteria=cube.judge_criteria,
        error=None if cube.error is None else cube.error[:, idx, :],
    )
