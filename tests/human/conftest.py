"""The ``study`` fixture: a small run, judge scores and a Label Studio project (human_helpers)."""

from __future__ import annotations

from pathlib import Path

import pytest
from human_helpers import Study, build_study


@pytest.fixture
def study(tmp_path: Path) -> Study:
    return build_study(tmp_path)
