"""FLUX dev and Kontext through the plugin's own loading path, on tiny random checkpoints.

The checkpoints are built by ``flux_tiny.build_tiny_flux`` and saved with ``save_pretrained``; the
experts load them with ``load()`` exactly as they load the hub checkpoints (``model=<path>``).
"""

from __future__ import annotations

import numpy as np
import pytest
from flux_tiny import TINY
from omnistory_flux.experts import FluxDev, FluxKontext
from omnistory_testkit import call_key, inputs_for
from PIL import Image

from omnistory_core.api import ComponentError, Failure

PROMPTS = ["a red fox in the snow", "a small boat on a lake", "two cats reading a book"]


def pixels(image: Image.Image) -> np.ndarray:
    assert isinstance(image, Image.Image), image
    return np.asarray(image, dtype=np.int16)


def close(a: Image.Image, b: Image.Image) -> bool:
    """Equal up to one 8-bit level: batched and single calls sum in a different order on the CPU,
    which moves a few float pixels across a rounding boundary; the noise itself is identical."""
    return int(np.abs(pixels(a) - pixels(b)).max()) <= 1


def different(a: Image.Image, b: Image.Image) -> bool:
    """Clearly apart: a mean difference far above the one-level jitter that ``close`` allows."""
    return float(np.abs(pixels(a) - pixels(b)).mean()) > 0.5


def loaded(cls, model, **params):
    expert = cls(model=str(model), seed=params.pop("seed", 0), **{**TINY, **params})
    expert.load()
    return expert


@pytest.fixture(scope="module")
def dev(tiny_dev):
    expert = loaded(FluxDev, tiny_dev, batch_size=4)
    yield expert
    expert.unload()


@pytest.fixture(scope="module")
def kontext(tiny_kontext):
    expert = loaded(FluxKontext, tiny_kontext, auto_resize=False, batch_size=4)
    yield expert
    expert.unload()


def test_dev_loads_from_a_local_checkpoint_and_makes_images(dev):
    assert type(dev.pipe).__name__ == "FluxPipeline" and dev.device == "cpu"
    images = dev.run_batch([{"image_prompt": p} for p in PROMPTS])
    assert [im.size for im in images] == [(64, 64)] * 3
    assert all(im.mode == "RGB" for im in images)
    assert different(images[0], images[1]) and different(images[1], images[2])


def test_dev_is_deterministic_per_seed_across_loads(tiny_dev, dev):
    item = [{"image_prompt": PROMPTS[0]}]
    first = dev.run_batch(item)[0]
    again = loaded(FluxDev, tiny_dev).run_batch(item)[0]
    assert np.array_equal(pixels(first), pixels(again))
    other_seed = loaded(FluxDev, tiny_dev, seed=1).run_batch(item)[0]
    assert different(first, other_seed)


def test_dev_images_do_not_depend_on_batch_composition(tiny_dev, dev):
    together = dev.run_batch([{"image_prompt": p} for p in PROMPTS])
    reordered = dev.run_batch([{"image_prompt": p} for p in reversed(PROMPTS)])[::-1]
    one_by_one = loaded(FluxDev, tiny_dev, batch_size=1)
    alone = one_by_one.run_batch([{"image_prompt": p} for p in PROMPTS])
    for a, b, c in zip(together, reordered, alone, strict=True):
        assert close(a, b) and close(a, c)


def test_dev_ignores_the_page_kontext_is_conditioned_on_it(dev, kontext, page):
    """Two examples that differ only in their current page: the engine hands dev identical
    inputs (same cache key, same image) and Kontext different ones (different images)."""
    pools = [{"image_prompt": PROMPTS[0], "current_image": page(f"p{i}", seed=i)} for i in (1, 2)]
    dev_inputs = [inputs_for(dev, pool) for pool in pools]
    assert dev_inputs[0] == dev_inputs[1] == {"image_prompt": PROMPTS[0]}
    assert call_key(dev, dev_inputs[0]) == call_key(dev, dev_inputs[1])
    a, b = dev.run_batch(dev_inputs)
    assert np.array_equal(pixels(a), pixels(b))

    kontext_inputs = [inputs_for(kontext, pool) for pool in pools]
    assert call_key(kontext, kontext_inputs[0]) != call_key(kontext, kontext_inputs[1])
    a, b = kontext.run_batch(kontext_inputs)
    assert different(a, b)
    # ...and the same page gives the same image again
    again = kontext.run_batch([kontext_inputs[0]])[0]
    assert close(a, again)


def test_kontext_really_encodes_the_page(kontext, page):
    """A page that is flat grey vs one that is noise changes Kontext's output, while the prompt
    and the noise seed stay the same."""
    from omnistory_core.api import Media

    noisy = page("noisy", seed=5)
    grey_path = noisy.path.replace("noisy", "grey")
    Image.new("RGB", (64, 64), (128, 128, 128)).save(grey_path)
    grey = Media(grey_path, "grey")
    out_noisy, out_grey = kontext.run_batch(
        [
            {"image_prompt": PROMPTS[1], "current_image": noisy},
            {"image_prompt": PROMPTS[1], "current_image": grey},
        ]
    )
    assert different(out_noisy, out_grey)


def test_kontext_mixed_page_sizes_match_single_calls(tiny_kontext, kontext, page):
    items = [
        {"image_prompt": PROMPTS[0], "current_image": page("square", (64, 64), 1)},
        {"image_prompt": PROMPTS[1], "current_image": page("wide", (100, 70), 2)},
        {"image_prompt": PROMPTS[2], "current_image": page("square2", (64, 64), 3)},
    ]
    together = kontext.run_batch(items)
    single = loaded(FluxKontext, tiny_kontext, auto_resize=False, batch_size=1)
    alone = single.run_batch(items)
    assert [im.size for im in together] == [(64, 64)] * 3
    for a, b in zip(together, alone, strict=True):
        assert close(a, b)


def test_kontext_auto_resize_snaps_the_page_to_a_preferred_resolution(tiny_kontext, page):
    """The default path: the page is encoded at the Kontext training resolution nearest its
    aspect ratio, and the output keeps the requested size."""
    expert = loaded(FluxKontext, tiny_kontext, height=64, width=80)
    item = {"image_prompt": PROMPTS[0], "current_image": page("landscape", (120, 80), 4)}
    job = expert.prepare(0, PROMPTS[0], item)
    assert job.image.size == job.group == (1184, 880)
    (image,) = expert.run_batch([item])
    assert image.size == (80, 64)


KEEP = "Keep the art style, characters, and color palette. "


def official_call(pipe, prompt: str, seed: int, **kwargs) -> Image.Image:
    """What the official runner does per image: one pipeline call with a CPU generator seeded
    with ``seed`` (sizes and steps as in the expert's call)."""
    import torch

    from omnistory_core.kit.diffusion import arrays_to_images

    output = pipe(
        prompt=prompt,
        height=TINY["height"],
        width=TINY["width"],
        num_inference_steps=TINY["steps"],
        max_sequence_length=TINY["max_sequence_length"],
        generator=torch.Generator("cpu").manual_seed(seed),
        output_type="np",
        **kwargs,
    )
    (image,) = arrays_to_images(output.images)
    return image


def noise(expert, jobs) -> list:
    """The first draws of the generators the expert hands to the pipeline for ``jobs``."""
    import torch

    return [torch.randn(8, generator=g) for g in expert.generators(jobs)]


def test_dev_seed_mode_fixed_gives_every_prompt_the_official_noise(tiny_dev, dev):
    import torch

    fixed = loaded(FluxDev, tiny_dev, seed_mode="fixed", batch_size=4)
    items = [{"image_prompt": p} for p in PROMPTS]
    jobs = [fixed.prepare(i, item["image_prompt"], item) for i, item in enumerate(items)]
    assert {job.seed for job in jobs} == {0}
    a, b, c = noise(fixed, jobs)
    assert torch.equal(a, b) and torch.equal(b, c)
    # per_prompt (the default): each prompt its own noise
    a, b, c = noise(dev, [dev.prepare(i, it["image_prompt"], it) for i, it in enumerate(items)])
    assert not torch.equal(a, b) and not torch.equal(b, c)

    together = fixed.run_batch(items)
    reordered = fixed.run_batch(items[::-1])[::-1]
    for prompt, image, again in zip(PROMPTS, together, reordered, strict=True):
        assert close(image, official_call(fixed.pipe, prompt, 0, guidance_scale=3.5))
        assert close(image, again)  # one generator per item: batch-mates do not matter
    assert different(together[0], dev.run_batch(items[:1])[0])


def test_kontext_prefix_and_fixed_seed_reproduce_the_official_call(tiny_kontext, page):
    prefixed = loaded(
        FluxKontext,
        tiny_kontext,
        auto_resize=False,
        batch_size=2,
        prompt_prefix=KEEP,
        seed_mode="fixed",
    )
    items = [
        {"image_prompt": PROMPTS[0], "current_image": page("a", seed=1)},
        {"image_prompt": PROMPTS[1], "current_image": page("b", seed=2)},
    ]
    jobs = [prefixed.prepare(i, item["image_prompt"], item) for i, item in enumerate(items)]
    assert [job.prompt for job in jobs] == [KEEP + PROMPTS[0], KEEP + PROMPTS[1]]
    images = prefixed.run_batch(items)
    for item, image in zip(items, images, strict=True):
        page_image = item["current_image"].open_image()
        official = official_call(
            prefixed.pipe,
            KEEP + item["image_prompt"],
            0,
            image=page_image,
            guidance_scale=2.5,
            max_area=TINY["height"] * TINY["width"],
            _auto_resize=False,
        )
        assert close(image, official)
    # the prefix really reaches the pipeline: without it the same noise and page differ
    plain = loaded(FluxKontext, tiny_kontext, auto_resize=False, seed_mode="fixed")
    assert different(images[0], plain.run_batch(items[:1])[0])


def test_a_failing_item_does_not_sink_its_batch(dev):
    """A prompt the tokenizers cannot encode (a lone surrogate, which JSON can carry) makes the
    batched pipeline call raise; the batch is retried item by item."""
    items = [
        {"image_prompt": PROMPTS[0]},
        {"image_prompt": "a \ud800 moon"},
        {"image_prompt": PROMPTS[2]},
        {"image_prompt": "   "},
    ]
    out = dev.run_batch(items)
    assert isinstance(out[1], Failure) and out[1].category == "model_error"
    assert "TypeError" in out[1].message
    assert out[3] == Failure("unusable_image_prompt", "the image prompt is empty")
    alone = dev.run_batch([items[0], items[2]])
    assert close(out[0], alone[0]) and close(out[2], alone[1])


def test_kontext_unreadable_or_tiny_page_is_that_items_failure(kontext, page, tmp_path):
    from omnistory_core.api import Media

    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    out = kontext.run_batch(
        [
            {"image_prompt": PROMPTS[0], "current_image": page("ok", (64, 64), 1)},
            {"image_prompt": PROMPTS[0], "current_image": page("tiny", (8, 8), 2)},
            {"image_prompt": PROMPTS[0], "current_image": Media(str(broken), "x")},
        ]
    )
    assert isinstance(out[0], Image.Image)
    assert out[1].category == "model_error" and "8x8" in out[1].message
    assert out[2].category == "model_error" and "UnidentifiedImageError" in out[2].message


def test_loading_a_missing_checkpoint_is_a_clear_error(tmp_path):
    expert = FluxDev(model=str(tmp_path / "nowhere"), seed=0, **TINY)
    with pytest.raises(ComponentError, match="cannot load .*nowhere.* with diffusers.FluxPipeline"):
        expert.load()


@pytest.mark.weights
@pytest.mark.gpu
@pytest.mark.parametrize("cls", [FluxDev, FluxKontext])
def test_real_checkpoints_on_gpu(cls, page):
    """The real gated checkpoints at their defaults (1024x1024, 28 steps, bf16)."""
    import os

    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not os.environ.get("HF_TOKEN"):
        pytest.skip("needs a CUDA GPU (about 35 GB), hub access and HF_TOKEN (gated checkpoints)")
    expert = cls(seed=0)
    expert.load()
    item = {
        "image_prompt": "a fox reading a book under a tree, storybook illustration",
        "current_image": page("real", (768, 512), 0),
    }
    (image,) = expert.run_batch([{k: item[k] for k in cls.reads}])
    expert.unload()
    assert image.size == (1024, 1024) and float(pixels(image).std()) > 10.0
