"""The planner tests' name for :mod:`omnistory_core.testing.servers` (kept importable).

``RecordingServer`` is :class:`omnistory_core.testing.FakeServer`; ``python -m
omnistory_core.planning.testing serve MODEL ...`` still runs the ``vllm serve`` stand-in.
"""

from __future__ import annotations

import sys
from typing import Any

from omnistory_core.testing.runs import demo_planner_items, files_containing, run_cli
from omnistory_core.testing.servers import (
    ROUTES,
    VALID_PLAN,
    RecordedRequest,
    Reply,
    fake_vllm_main,
    main,
)
from omnistory_core.testing.servers import FakeServer as RecordingServer


def run_omnistory_cli(
    *args: str, cwd: str, env: dict[str, str] | None = None, timeout: float = 300
) -> Any:
    """:func:`omnistory_core.testing.run_cli` with this module's historical default timeout."""
    return run_cli(*args, cwd=cwd, env=env, timeout=timeout)


__all__ = [
    "ROUTES",
    "VALID_PLAN",
    "RecordedRequest",
    "RecordingServer",
    "Reply",
    "demo_planner_items",
    "fake_vllm_main",
    "files_containing",
    "main",
    "run_omnistory_cli",
]

if __name__ == "__main__":
    sys.exit(main())
