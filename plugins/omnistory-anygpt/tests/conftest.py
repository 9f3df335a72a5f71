"""Fixtures: the stand-in AnyGPT checkout, its tiny checkpoints, and tiny scripted chat models."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from anygpt_standin import build_all, build_chat_model, script  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """Tiny models run several times faster on one thread than on two busy ones."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def standin(tmp_path_factory) -> dict[str, Path]:
    """The stand-in checkout (``source_dir``) and the SEED, unCLIP and speech checkpoints."""
    return build_all(tmp_path_factory.mktemp("anygpt"))


@pytest.fixture(scope="session")
def chat_models(tmp_path_factory):
    """``chat_models(image=..., speech=...)`` -> a tiny chat checkpoint answering that script
    (built once per script)."""
    root = tmp_path_factory.mktemp("chat")
    built: dict[tuple[str, str], Path] = {}

    def get(image: str = "ok", speech: str = "ok") -> Path:
        key = (image, speech)
        if key not in built:
            built[key] = build_chat_model(
                root / f"{image}-{speech}", script(image=image, speech=speech)
            )
        return built[key]

    return get


@pytest.fixture(scope="session")
def demo_items() -> list[dict]:
    """The first two demo examples as the engine hands them to a backbone."""
    from omnistory_testkit import demo_items as engine_items

    return engine_items(2)
