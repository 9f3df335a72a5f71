"""The long scores table: one row per (system, scope, unit, track, evaluator, criterion).

This format is a public contract shared by metrics, judges and the analysis/report code::

    {"system", "example_id", "kind": "metric"|"judge"|"human",
     "track": one of the task's tracks (Omni-StoryBench: "text"|"image"|"speech"|"omni"),
     "evaluator", "criterion", "score": float|null,
     "status": "ok"|"missing_output"|"invalid"|"error",
     "scope": "group"|"run"  (absent: "item")}

``scope`` says what ``example_id`` names: an item (an Omni-StoryBench transition, a ViStoryBench
shot; the default, left out of the line so item rows read as they always have), a group (a story:
``example_id`` is its id) or the whole run (Inception Score: ``example_id`` is ``""``).  The tracks
come from the task (:mod:`omnistory_core.tasks`), so a row checks only their form here.

Statuses: ``ok`` a score; ``missing_output`` the system produced no output to score; ``invalid``
the evaluator answered and the answer is unusable after the permitted repair (the paper's meaning);
``error`` the evaluator could not run (missing package, weights or key, server unreachable, timeout
after retries, out of memory, worker crash).  An ``error`` row also has a ``cause`` field; it is
never a score: aggregation leaves its example out under both policies and the next ``evaluate``
recomputes it.

``human`` rows are human ratings imported from a Label Studio export by ``human import``
(Appendix F.5): ``evaluator`` is ``annotator:<id>``, ``criterion`` the track's rubric criterion,
``score`` 1–10; a skipped or unscored evaluation is ``invalid`` with ``cause`` ``skipped`` or
``unscored: ...``.  The leaderboard never reads them; the report's Tables 18–21 do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

KINDS = ("metric", "judge", "human")
SCOPES = ("item", "group", "run")
STATUSES = ("ok", "missing_output", "invalid", "error")
COLUMNS = ("system", "example_id", "kind", "track", "evaluator", "criterion", "score", "status")


@dataclass(frozen=True)
class ScoreRow:
    system: str
    example_id: str
    kind: str
    track: str
    evaluator: str
    criterion: str
    score: float | None
    status: str
    #: why an ``error`` row (or a skipped ``human`` row) has no score (outside COLUMNS)
    cause: str | None = None
    #: what ``example_id`` names (see the module docstring)
    scope: str = "item"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.track, str) or not self.track or self.track != self.track.strip():
            raise ValueError(f"track must be a task's track name, got {self.track!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {self.scope!r}")
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.status == "ok" and self.score is None:
            raise ValueError("a row with status 'ok' needs a score")
        if self.status == "error" and self.score is not None:
            raise ValueError("a row with status 'error' has no score")

    def to_dict(self) -> dict:
        data = asdict(self)
        if data["cause"] is None:
            del data["cause"]
        if data["scope"] == "item":  # item rows keep the bytes they always had
            del data["scope"]
        return data


def write_scores(path: str | Path, rows: Iterable[ScoreRow]) -> int:
    """Write rows as JSON lines atomically (temp file + rename); returns the row count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row.to_dict(), ensure_ascii=False, sort_keys=False) + "\n")
            n += 1
    os.replace(tmp, path)
    return n


def read_scores(path: str | Path) -> Iterator[ScoreRow]:
    """Read a scores.jsonl file; errors name the file and line."""
    path = Path(path)
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                cause = data.get("cause")
                yield ScoreRow(
                    **{k: data[k] for k in COLUMNS},
                    cause=None if cause is None else str(cause),
                    scope=str(data.get("scope", "item")),
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}:{lineno}: invalid scores row: {exc}") from exc
