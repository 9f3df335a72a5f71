"""On a CUDA GPU: the tiny checkpoints in bfloat16 (``dtype=auto``), and the real checkpoints when
they are in the local Hugging Face cache.  Skipped on CPU-only machines."""

from __future__ import annotations

import pytest
from emu3_tiny import TINY_IMAGE_AREA
from omnistory_emu3.backbone import Emu3
from PIL import Image

from omnistory_core.api import ComponentError


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


pytestmark = pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
def test_tiny_checkpoints_on_cuda_in_bfloat16(trained_chat, tiny_gen, items):
    import torch

    backbone = Emu3(chat_model=str(trained_chat), gen_model=str(tiny_gen))  # device/dtype auto
    backbone.load()
    assert backbone.engine.device == "cuda"
    assert backbone.engine.gen_model.dtype == torch.bfloat16
    image, usage = backbone.generate_image("a small fox at a window", seed=0)
    assert image.size == (32, 32) and usage["image_area"] == TINY_IMAGE_AREA
    out = backbone.run_one(items[0])
    assert out.failures == {}
    assert out.text == 'Pip ran to the hill. "Come quick!"'
    assert out.image.size == (32, 32)
    backbone.unload()


@pytest.mark.weights
@pytest.mark.gpu
def test_real_native_checkpoints(items):
    """BAAI/Emu3-Chat-hf and the Gen conversion (OMNISTORY_MODEL_BACKBONE_EMU3_GEN or
    BAAI/Emu3-Gen-hf), from the local cache."""
    import os

    from huggingface_hub import try_to_load_from_cache

    gen = os.environ.get("OMNISTORY_MODEL_BACKBONE_EMU3_GEN", "BAAI/Emu3-Gen-hf")
    for repo in ("BAAI/Emu3-Chat-hf", gen):
        if not os.path.isdir(repo) and not isinstance(
            try_to_load_from_cache(repo, "config.json"), str
        ):
            pytest.skip(f"{repo} is not in the local Hugging Face cache")
    backbone = Emu3(gen_model=gen)
    backbone.load()
    image, usage = backbone.generate_image("a small orange fox at a night window", seed=0)
    assert isinstance(image, Image.Image) and image.size == (720, 720)
    assert usage["image_tokens"] == [90, 90]
    try:
        out = backbone.run_one(items[0])
    except ComponentError as exc:  # the real model may still miss the JSON: a parse category
        assert exc.category in ("plan_json_error", "plan_missing_field")
    else:
        assert out.text and out.plan["speech"]["utterance"] in out.text
    backbone.unload()
