"""``implementation=remote_code`` on stand-ins (see emu3_standin.py): the git-only processor is
imported from ``source_dir``, the checkpoints load with ``trust_remote_code=True``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from emu3_standin import build_llm, build_vq, write_source_tree
from omnistory_emu3.backbone import Emu3
from PIL import Image

from omnistory_core.api import ComponentError


@pytest.fixture(scope="module")
def standins(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("remote")
    return {
        "source_dir": write_source_tree(root / "Emu3"),
        "vq_model": build_vq(root / "vq"),
        "chat_model": build_llm(root / "chat", seed=0),
        "gen_model": build_llm(root / "gen", image_area=32 * 32, seed=1),
    }


@pytest.fixture(scope="module")
def remote(standins) -> Emu3:
    backbone = Emu3(
        implementation="remote_code",
        device="cpu",
        chat_max_new_tokens=16,
        **{k: str(v) for k, v in standins.items()},
    )
    backbone.load()
    yield backbone
    backbone.unload()


def test_load_imports_the_processor_from_source_dir(remote, standins):
    engine = remote.engine
    assert type(engine).__name__ == "RemoteCodeEmu3"
    module = sys.modules[type(engine.gen_processor).__module__]
    assert (
        Path(module.__file__).resolve()
        == (standins["source_dir"] / "emu3" / "mllm" / "processing_emu3.py").resolve()
    )
    # remote code from the vision tokenizer checkpoint, shared by both processors
    assert type(engine.chat_processor.vision_tokenizer).__name__ == "StandInVQModel"
    assert engine.chat_processor.vision_tokenizer is engine.gen_processor.vision_tokenizer
    assert engine.gen_processor.tokenizer.padding_side == "left"


def test_remote_generation_stage_returns_the_decoded_image(remote):
    image, usage = remote.generate_image("a small fox at a window", seed=0)
    assert isinstance(image, Image.Image) and image.size == (32, 32)
    assert usage["image_tokens"] == [4, 4] and usage["image_area"] == 32 * 32


def test_remote_garbage_answer_is_a_parse_failure(remote, items):
    with pytest.raises(ComponentError) as info:
        remote.run_one(items[0])
    assert info.value.category in ("plan_json_error", "plan_missing_field")


def test_source_dir_without_the_processor_says_how_to_get_it(standins, tmp_path):
    params = {k: str(v) for k, v in standins.items()}
    backbone = Emu3(implementation="remote_code", device="cpu", **{**params,
                    "source_dir": str(tmp_path)})  # fmt: skip
    with pytest.raises(ComponentError) as info:
        backbone.load()
    message = str(info.value)
    assert "emu3/mllm/processing_emu3.py" in message
    assert "git clone https://github.com/baaivision/Emu3.git" in message
    assert "dbbf9858194d70b8c58293e219ecffe22df0f9c7" in message
