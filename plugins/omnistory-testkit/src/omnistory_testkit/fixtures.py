"""pytest fixtures of the test kit (registered through the ``pytest11`` entry point)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from omnistory_testkit.runs import run_cli
from omnistory_testkit.servers import FakeServer


@pytest.fixture
def omnistory_cli(tmp_path: Path) -> Callable[..., Any]:
    """``omnistory_cli("planner=copy", "dataset.limit=2")`` runs the real CLI in ``tmp_path``."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> Any:
        return run_cli(*args, cwd=tmp_path, env=env, timeout=timeout)

    return run


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A :class:`FakeServer` on 127.0.0.1 answering every request with a valid plan."""
    with FakeServer() as server:
        yield server
