"""Progress bars for stage work (generation stages, evaluators), drawn with rich on stderr.

The engine and the evaluation runner take a ``progress(label, total) -> advance(n)`` callable;
:func:`progress_bars` makes one (or a silent one when disabled).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

Advance = Callable[[int], None]
ProgressFn = Callable[[str, int], Advance]


@contextmanager
def progress_bars(enabled: bool) -> Iterator[ProgressFn]:
    """Yield ``progress(label, total) -> advance(n)`` backed by rich progress bars on stderr."""
    if not enabled:
        yield lambda label, total: lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal and False,
    ) as bars:

        def progress(label: str, total: int) -> Advance:
            task = bars.add_task(label, total=total)
            return lambda n: bars.advance(task, n)

        yield progress
