"""Fixtures: the stand-in MMaDA checkout and tiny checkpoints with answers scripted per page."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mmada_pages import SCRIPTS  # noqa: E402
from mmada_standin import build_checkpoints, write_source_tree  # noqa: E402


@pytest.fixture(scope="session")
def source_tree(tmp_path_factory) -> Path:
    return write_source_tree(tmp_path_factory.mktemp("src") / "MMaDA")


@pytest.fixture(scope="session")
def checkpoints(source_tree, tmp_path_factory) -> tuple[Path, Path]:
    return build_checkpoints(
        source_tree, tmp_path_factory.mktemp("ckpt"), SCRIPTS, fail_t2i_trigger="zigzag"
    )


@pytest.fixture(scope="session", autouse=True)
def _forget_the_standin(tmp_path_factory):
    """After the session, drop the stand-in's generic ``models``/``training`` modules and its
    ``sys.path`` entries, which the plugin's load() leaves in place (other git-only models use the
    same package names)."""
    yield
    base = str(tmp_path_factory.getbasetemp().resolve())
    for name in [n for n in sys.modules if n.split(".", 1)[0] in ("models", "training")]:
        if str(getattr(sys.modules[name], "__file__", "") or "").startswith(base):
            del sys.modules[name]
    sys.path[:] = [p for p in sys.path if not p.startswith(base)]
