"""Small builders for hand-written scores tables."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from omnistory_report.analysis import build_cube, frame_from_rows
from omnistory_report.analysis.cube import ScoreCube

from omnistory_core.scores import ScoreRow

CRITERIA = ("c1", "c2", "c3", "c4")
SPEECH_FIELDS = ("emotion", "speed", "pitch", "gender")


def _row(system, example, kind, track, evaluator, criterion, score, status=None):
    if status is None:
        status = "ok" if score is not None else "invalid"
    return ScoreRow(system, example, kind, track, evaluator, criterion, score, status)


def bert(system: str, example: str, score: float | None, status: str | None = None):
    return [_row(system, example, "metric", "text", "bertscore", "f1", score, status)]


def clip(system: str, example: str, score: float | None, status: str | None = None):
    return [_row(system, example, "metric", "image", "clip", "cosine", score, status)]


def meta(system: str, example: str, fields: Sequence[float | None] | None, status=None):
    """Four speech-metadata rows; ``fields=None`` with status for a missing output."""
    if fields is None:
        return [
            _row(system, example, "metric", "speech", "speech_meta", f, None, status)
            for f in SPEECH_FIELDS
        ]
    return [
        _row(system, example, "metric", "speech", "speech_meta", f, v)
        for f, v in zip(SPEECH_FIELDS, fields, strict=True)
    ]


def judge(
    system: str,
    example: str,
    track: str,
    evaluator: str,
    scores: Sequence[float | None] | None,
    status: str | None = None,
    criteria: Sequence[str] = CRITERIA,
):
    """Judge rows; ``scores=None`` gives four rows with ``status`` (e.g. missing_output)."""
    if scores is None:
        return [_row(system, example, "judge", track, evaluator, c, None, status) for c in criteria]
    return [
        _row(system, example, "judge", track, evaluator, c, v)
        for c, v in zip(criteria, scores, strict=False)
    ]


def cube_of(groups: Iterable[list[ScoreRow]]) -> tuple[object, ScoreCube]:
    rows = [r for g in groups for r in g]
    frame = frame_from_rows(rows)
    return frame, build_cube(frame)
