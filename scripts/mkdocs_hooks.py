"""A hook of mkdocs.yml: the build stops when a reference page under docs/reference/ differs from
what its declarations generate now (``scripts/docs_reference.py``), so a stale table fails
``mkdocs build --strict`` as a broken link does."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

_SCRIPT = Path(__file__).resolve().with_name("docs_reference.py")


def on_pre_build(config: Any) -> None:
    spec = importlib.util.spec_from_file_location("docs_reference", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stale = module.stale()
    if stale:
        pages = ", ".join(f"docs/reference/{name}" for name in stale)
        raise PluginError(f"{pages}: stale; run `python scripts/docs_reference.py`")
