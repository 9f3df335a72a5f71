"""Fixtures: the tiny Qwen2.5-Omni checkpoints (built once per session) and demo items."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from qwen25omni_tiny import build_tiny_qwen25omni, with_reply  # noqa: E402


@pytest.fixture(scope="session")
def tiny_qwen25omni(tmp_path_factory) -> Path:
    """Replies with a quoted line, then a JSON page: both passes succeed."""
    return build_tiny_qwen25omni(tmp_path_factory.mktemp("ckpt") / "tiny-qwen25omni")


@pytest.fixture(scope="session")
def tiny_qwen25omni_no_json(tiny_qwen25omni, tmp_path_factory) -> Path:
    """Same weights; the reply has a line of dialogue but no JSON: pass 2 fails."""
    return with_reply(
        tiny_qwen25omni,
        tmp_path_factory.mktemp("ckpt") / "tiny-qwen25omni-no-json",
        "Hurry, Lena, hurry!\nThe page goes on without any object.",
    )


@pytest.fixture(scope="session")
def tiny_qwen25omni_silent(tiny_qwen25omni, tmp_path_factory) -> Path:
    """Same weights; the reply is an empty pair of quotes: pass 1 has no line of dialogue."""
    return with_reply(
        tiny_qwen25omni, tmp_path_factory.mktemp("ckpt") / "tiny-qwen25omni-silent", '""'
    )


@pytest.fixture(scope="session")
def demo_items() -> list[dict]:
    """Backbone inputs for the first three demo examples, built as the engine builds them."""
    from omnistory_testkit import demo_planner_items

    return demo_planner_items(limit=3)
