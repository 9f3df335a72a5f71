"""Analysis of the scores table: leaderboard, statistics and diagnostics (paper E.5, E.6, F).

Everything is a pure function of the long scores table (``scores.jsonl``)::

    frame = load_scores_frame(path)      # validated DataFrame
    cube = build_cube(frame)             # per-example (cell, system, example) matrices
    lb = leaderboard(cube)               # valid-only and zero-filled, LEADERBOARD_COLUMNS
    tables = compute_statistics(frame, cube, lb)

numpy/pandas are imported here; scipy only inside the functions that need it.
"""

from omnistory_report.analysis.cube import Cell, ScoreCube, build_cube
from omnistory_report.analysis.frame import frame_from_rows, load_scores_frame
from omnistory_report.analysis.leaderboard import (
    COMPONENTS,
    LEADERBOARD_COLUMNS,
    component_matrix,
    criterion_scores,
    judge_coverage,
    leaderboard,
    modality_frame,
    scaled_components,
)
from omnistory_report.analysis.statistics import StatisticsOptions, StatTable, compute_statistics

__all__ = [
    "COMPONENTS",
    "LEADERBOARD_COLUMNS",
    "Cell",
    "ScoreCube",
    "StatTable",
    "StatisticsOptions",
    "build_cube",
    "component_matrix",
    "compute_statistics",
    "criterion_scores",
    "frame_from_rows",
    "judge_coverage",
    "leaderboard",
    "load_scores_frame",
    "modality_frame",
    "scaled_components",
]
