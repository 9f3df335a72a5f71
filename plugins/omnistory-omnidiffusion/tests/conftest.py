"""Fixtures: the stand-in Omni-Diffusion checkpoint, source tree, MAGVIT-v2 and speech decoder
(see omnidiffusion_standin.py), built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402
from omnidiffusion_standin import build_all, build_source_tree, variant  # noqa: E402


@pytest.fixture(scope="session")
def source_tree(tmp_path_factory) -> Path:
    """Only the stand-in checkout (cheap: no torch)."""
    return build_source_tree(tmp_path_factory.mktemp("src") / "Omni-Diffusion")


@pytest.fixture(scope="session")
def standin(tmp_path_factory) -> dict[str, Path]:
    return build_all(tmp_path_factory.mktemp("standin"))


@pytest.fixture(scope="session")
def make_variant(standin, tmp_path_factory):
    """A checkpoint like the stand-in one with some scripting fields changed (once per name)."""
    built: dict[str, Path] = {}

    def make(name: str, **config) -> Path:
        if name not in built:
            target = tmp_path_factory.mktemp("variant") / name
            built[name] = variant(standin["model"], target, **config)
        return built[name]

    return make


@pytest.fixture(scope="module")
def single_thread():
    """The stand-ins run thousands of tiny tensor ops: on a busy machine the thread pool's wake-ups
    dominate, one thread does not wait for them (restored afterwards)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
