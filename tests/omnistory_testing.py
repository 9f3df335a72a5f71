"""Shared test helpers: the plugin kit's CLI runner (``omnistory_core.testing.run_cli``)."""

from __future__ import annotations

import json
from pathlib import Path

from omnistory_core.testing import run_cli

__all__ = ["load_json", "run_cli"]


def load_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
