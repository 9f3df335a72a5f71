"""What the core asks of the distributions that plug in after generation.

Generation (this package) writes job directories; evaluation (``omnistory-eval``) reads them and
writes the scores table; reporting (``omnistory-report``) reads both.  The core calls forward
only through these shapes, registered by hooks (:mod:`omnistory_core.hookspecs`), so it imports
neither distribution.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

#: the distributions a user installs for what the core alone does not do
EVAL_DISTRIBUTION = "omnistory-eval"
REPORT_DISTRIBUTION = "omnistory-report"


@dataclass(frozen=True)
class Command:
    """A subcommand of ``python -m omnistory_core``: ``main(argv) -> exit status``."""

    name: str
    main: Callable[[list[str]], int]
    help: str = ""
    plugin: str = ""


class EvaluationService(Protocol):
    """The end-of-sweep evaluation, as the core's sweep callback and dry run use it."""

    def check(self, metrics: list[str], judges: list[str]) -> None:
        """Raise :class:`omnistory_core.errors.ConfigError` for an unknown metric, judge or
        panel, before any job runs."""
        ...

    def run(self, sweep_dir: Path, *, evaluation: dict[str, Any], progress: bool) -> int:
        """Score the sweep evaluator-major into ``<sweep_dir>/scores.jsonl``; the exit status
        (2: its pre-flight stopped it, 1: ``error`` rows remain, 0: fine)."""
        ...

    def plan(self, sweep_dir: Path, *, evaluation: dict[str, Any], settings: Any) -> Any:
        """The dry run's evaluator rows: an object with ``rows``, ``cannot_run_here`` and
        ``notes``; raise :class:`omnistory_core.errors.ConfigError` when the evaluation cannot
        start as configured."""
        ...


def missing_distribution(what: str, distribution: str, wanted: str) -> str:
    """The one line for something asked of a distribution that is not installed."""
    return (
        f"{what} needs the {distribution} distribution, which is not installed; "
        f"install it (pip install {distribution}, or ./plugins/{distribution} from a checkout) "
        f"or drop {wanted}"
    )
