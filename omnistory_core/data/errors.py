"""Dataset errors that say which file, row, example and field are wrong."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from omnistory_core.errors import UserError

MAX_PROBLEMS_SHOWN = 50


@dataclass(frozen=True)
class Problem:
    """One validation finding.

    ``row`` is the 0-based parquet row, which is also the candidate index; ``None`` for problems
    that concern the whole file (a missing column, an unreadable parquet).
    """

    file: str
    field: str
    message: str
    row: int | None = None
    example_id: str | None = None

    def __str__(self) -> str:
        where = [self.file]
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.example_id:
            where.append(f"id {self.example_id!r}")
        where.append(f"field {self.field!r}")
        return f"{', '.join(where)}: {self.message}"


class DatasetError(UserError):
    """A dataset that cannot be used: unreadable, incomplete, or failing validation.

    ``problems`` holds every finding (the message shows the first ``MAX_PROBLEMS_SHOWN``).
    """

    def __init__(self, summary: str, problems: Sequence[Problem] = ()):
        self.summary = summary
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.problems:
            return self.summary
        shown = self.problems[:MAX_PROBLEMS_SHOWN]
        lines = [f"{self.summary} ({len(self.problems)} problem(s)):"]
        lines += [f"  - {problem}" for problem in shown]
        hidden = len(self.problems) - len(shown)
        if hidden:
            lines.append(f"  ... and {hidden} more not shown")
        return "\n".join(lines)
