"""Nitro-T's loading path on a tiny checkpoint with stand-in remote code (see nitro_tiny.py).

Exercised: ``DiffusionPipeline.from_pretrained(..., trust_remote_code=True)`` resolving a custom
pipeline class and a custom transformer class from files in the checkpoint, the causal-LM text
encoder loaded separately and handed to the pipeline, and the model card's call.  Not exercised:
Nitro-T's own pipeline and transformer code (see the weights-marked test at the end).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from omnistory_nitro.expert import NitroT
from PIL import Image

from omnistory_core.api import ComponentError, Failure

TINY = {"height": 64, "width": 64, "steps": 2}
PROMPTS = ["a red fox in the snow", "a small boat on a lake", "two cats reading a book"]


def pixels(image):
    assert isinstance(image, Image.Image), image
    return np.asarray(image, dtype=np.int16)


def loaded(model, text_encoder, **params):
    expert = NitroT(
        model=str(model),
        text_encoder=str(text_encoder),
        seed=params.pop("seed", 0),
        **{**TINY, **params},
    )
    expert.load()
    return expert


@pytest.fixture(scope="module")
def nitro(tiny_nitro, tiny_llama):
    expert = loaded(tiny_nitro, tiny_llama)
    yield expert
    expert.unload()


def test_remote_code_pipeline_gets_the_separately_loaded_text_encoder(nitro, tiny_llama):
    import torch

    assert type(nitro.pipe).__name__ == "TinyNitroPipeline"  # from pipeline.py in the checkpoint
    assert type(nitro.pipe.transformer).__name__ == "TinyNitroMMDiT"  # transformer/transformer.py
    encoder = nitro.pipe.text_encoder
    assert type(encoder).__name__ == "LlamaForCausalLM"
    assert encoder.name_or_path == str(tiny_llama)
    assert encoder.dtype == torch.float32 and nitro.device == "cpu"  # dtype=auto on the CPU


def test_generates_deterministic_images_per_seed(nitro, tiny_nitro, tiny_llama):
    items = [{"image_prompt": p} for p in PROMPTS]
    first = nitro.run_batch(items)
    assert [im.size for im in first] == [(64, 64)] * 3
    again = loaded(tiny_nitro, tiny_llama).run_batch(items[:1])[0]
    assert np.array_equal(pixels(first[0]), pixels(again))
    other = loaded(tiny_nitro, tiny_llama, seed=1).run_batch(items[:1])[0]
    assert float(np.abs(pixels(first[0]) - pixels(other)).mean()) > 0.5


def test_list_batches_match_single_calls(nitro, tiny_nitro, tiny_llama):
    singles = nitro.run_batch([{"image_prompt": p} for p in PROMPTS])
    batched = loaded(tiny_nitro, tiny_llama, batch_size=3)
    together = batched.run_batch([{"image_prompt": p} for p in reversed(PROMPTS)])[::-1]
    for a, b in zip(singles, together, strict=True):
        assert int(np.abs(pixels(a) - pixels(b)).max()) <= 1


def test_seed_mode_fixed_is_the_official_cpu_generator_seeded_with_seed(
    nitro, tiny_nitro, tiny_llama
):
    import torch
    from omnistory_nitro.expert import to_images

    official = loaded(
        tiny_nitro, tiny_llama, seed_mode="fixed", generator_device="cpu", batch_size=3
    )
    items = [{"image_prompt": p} for p in PROMPTS]
    together = official.run_batch(items)
    alone = loaded(tiny_nitro, tiny_llama, seed_mode="fixed", generator_device="cpu")
    for prompt, image, single in zip(PROMPTS, together, alone.run_batch(items), strict=True):
        # the official runner's call: one CPU generator seeded with 0 per image
        with torch.inference_mode():
            out = official.pipe(
                prompt=prompt,
                height=64,
                width=64,
                num_inference_steps=2,
                guidance_scale=4.0,
                generator=torch.Generator("cpu").manual_seed(0),
            )
        (reference,) = to_images(out.images)
        assert np.array_equal(pixels(single), pixels(reference))
        assert int(np.abs(pixels(image) - pixels(single)).max()) <= 1  # batch-independent
    per_prompt = nitro.run_batch(items[:1])[0]
    assert float(np.abs(pixels(together[0]) - pixels(per_prompt)).mean()) > 0.5


def test_generators_per_mode_and_device(nitro, tiny_nitro, tiny_llama):
    import torch
    from omnistory_nitro.expert import Job

    def draws(expert, prompts):
        jobs = [Job(i, p, expert.item_seed(p)) for i, p in enumerate(prompts)]
        return [torch.randn(8, generator=g) for g in expert.generators(jobs)]

    fixed = NitroT(seed=0, seed_mode="fixed")
    fixed.device = "cpu"
    a, b = draws(fixed, PROMPTS[:2])
    assert torch.equal(a, b)  # fixed: the same noise for different prompts
    a, b = draws(nitro, PROMPTS[:2])
    assert not torch.equal(a, b)  # per_prompt: each prompt its own noise
    # generator_device=cpu keeps the generators on the CPU whatever the pipeline's device;
    # pipeline puts them on the pipeline's device
    on_cpu = NitroT(seed=0, generator_device="cpu")
    on_cpu.device = "cuda:0"  # as after loading onto a GPU (no generator is made on it here)
    assert {g.device.type for g in on_cpu.generators([Job(0, "x", 1), Job(1, "y", 2)])} == {"cpu"}
    assert nitro.generator_device == "pipeline"
    assert {g.device.type for g in nitro.generators([Job(0, "x", 1)])} == {nitro.device}


def test_failing_items_are_per_item_failures(nitro, tiny_nitro, tiny_llama):
    items = [{"image_prompt": PROMPTS[0]}, {"image_prompt": "a \ud800 moon"}, {"image_prompt": ""}]
    for expert in (nitro, loaded(tiny_nitro, tiny_llama, batch_size=3)):
        out = expert.run_batch(items)
        assert isinstance(out[0], Image.Image)
        assert out[1].category == "model_error" and "TypeError" in out[1].message
        assert out[2] == Failure("unusable_image_prompt", "the image prompt is empty")


def test_remote_code_needs_trust_remote_code(tiny_nitro, tiny_llama):
    expert = NitroT(
        model=str(tiny_nitro), text_encoder=str(tiny_llama), seed=0, trust_remote_code=False, **TINY
    )
    with pytest.raises(ComponentError, match="(?s)custom code.*set trust_remote_code=true"):
        expert.load()


def test_missing_text_encoder_is_named(tiny_nitro, tmp_path):
    expert = NitroT(model=str(tiny_nitro), text_encoder=str(tmp_path / "no-llama"), seed=0, **TINY)
    with pytest.raises(ComponentError, match="cannot load the text encoder .*no-llama"):
        expert.load()


def test_cli_end_to_end(tiny_nitro, tiny_llama, tmp_path):
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "image=nitro",
            f"image.model={tiny_nitro}",
            f"image.text_encoder={tiny_llama}",
            "image.height=64",
            "image.width=64",
            "image.steps=2",
            "dataset.limit=2",
            f"output_root={out}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run = out / "runs" / "demo" / "template-nitro-espeak"
    rows = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert [r["image"]["status"] for r in rows] == ["ok", "ok"]
    with Image.open(run / rows[0]["image"]["path"]) as image:
        assert image.size == (64, 64)


@pytest.mark.gpu
def test_generator_device_on_a_gpu(tiny_nitro, tiny_llama):
    """On a GPU, generator_device=pipeline draws the noise on the GPU and cpu on the CPU, which
    are different random streams."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from omnistory_nitro.expert import Job

    item = [{"image_prompt": PROMPTS[0]}]
    on_gpu = loaded(tiny_nitro, tiny_llama, device="cuda", dtype="float32")
    on_cpu = loaded(tiny_nitro, tiny_llama, device="cuda", dtype="float32", generator_device="cpu")
    assert {g.device.type for g in on_gpu.generators([Job(0, "x", 1)])} == {"cuda"}
    assert {g.device.type for g in on_cpu.generators([Job(0, "x", 1)])} == {"cpu"}
    a, b = on_gpu.run_batch(item)[0], on_cpu.run_batch(item)[0]
    assert float(np.abs(pixels(a) - pixels(b)).mean()) > 0.5


@pytest.mark.weights
@pytest.mark.gpu
def test_real_nitro_t_checkpoint():
    """The real amd/Nitro-T-1.2B remote code with the real Llama-3.2-1B (both downloaded)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not os.environ.get("HF_TOKEN"):
        pytest.skip("needs a CUDA GPU, hub access and HF_TOKEN for the gated Llama-3.2-1B")
    expert = NitroT(seed=0)
    expert.load()
    (image,) = expert.run_batch([{"image_prompt": "a fox reading a book under a tree"}])
    expert.unload()
    assert isinstance(image, Image.Image) and image.size == (1024, 1024)
    assert float(pixels(image).std()) > 10.0  # not a blank picture
