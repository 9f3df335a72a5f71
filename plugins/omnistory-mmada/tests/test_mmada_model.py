"""The plugin's loading and calling code on the stand-in checkout and tiny checkpoints.

Exercised: ``source_dir`` on ``sys.path`` and the upstream module names, the tokenizer /
MAGVIT-v2 / MMaDA ``from_pretrained`` calls, the MMU input layout (``<|mmu|><|soi|>`` codes
``<|eoi|>`` + chat template), the ``mmu_generate`` and ``t2i_generate`` arguments, decoding, and
how the engine records each outcome.  Not exercised: MMaDA's own model code and weights (see the
``weights``/``gpu`` test at the end).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from mmada_pages import PAGE0
from omnistory_mmada.backbone import MMaDA
from omnistory_mmada.prompts import SYSTEM_PROMPT, T2I_SUFFIX, user_prompt
from omnistory_testkit import (
    demo_examples,
    example_items,
    inputs_for,
    installed_registry,
    materialize,
    open_store,
    run_job,
)
from PIL import Image

from omnistory_core.api import ComponentError

EXAMPLES = demo_examples(limit=4)


def make(source_tree, checkpoints, **params) -> MMaDA:
    model, vq = checkpoints
    return MMaDA(
        source_dir=str(source_tree), model=str(model), vq_model=str(vq), **{"seed": 0, **params}
    )


def items(backbone: MMaDA) -> list[dict]:
    return [inputs_for(backbone, pool) for pool in example_items(EXAMPLES)]


@pytest.fixture(scope="module")
def mmada(source_tree, checkpoints):
    backbone = make(source_tree, checkpoints)
    backbone.load()
    yield backbone
    backbone.unload()


def test_loads_the_checkout_and_the_checkpoints(mmada, source_tree, checkpoints):
    import torch

    model_file = Path(__import__(type(mmada.model).__module__).__file__)
    assert model_file.resolve().is_relative_to(source_tree.resolve())
    assert type(mmada.model).__name__ == "MMadaModelLM"
    assert type(mmada.vq_model).__name__ == "MAGVITv2"
    assert type(mmada.prompting).__name__ == "UniversalPrompting"
    assert mmada.prompting.max_text_len == 1024 + 1  # max_text_len handed to UniversalPrompting
    assert mmada.prompting.text_tokenizer.padding_side == "left"
    assert mmada.model.dtype == torch.float32 and mmada.device == "cpu"  # dtype=auto on the CPU
    assert not mmada.vq_model.training and not mmada.model.training


def test_mmu_input_is_the_page_codes_then_the_chat(mmada):
    tokenizer = mmada.prompting.text_tokenizer
    ids = mmada.prompting.sptids_dict
    mmada.model.calls.clear()
    out = mmada.run_one(items(mmada)[0])
    mmu, t2i = mmada.model.calls
    assert (mmu["kind"], t2i["kind"]) == ("mmu", "t2i")
    assert (mmu["max_new_tokens"], mmu["steps"], mmu["block_length"]) == (512, 256, 128)
    row = mmu["input_ids"][0].tolist()
    assert row[:2] == [int(ids["<|mmu|>"]), int(ids["<|soi|>"])]
    codes = row[2:1026]  # 512 px page -> 32 x 32 MAGVIT-v2 codes, offset by the text vocabulary
    assert row[1026] == int(ids["<|eoi|>"])
    assert min(codes) >= len(tokenizer) and len(set(codes)) > 1
    chat = tokenizer.decode(row[1027:])
    ex = EXAMPLES[0]
    assert chat.startswith("<|startoftext|><|start_header_id|>system<|end_header_id|>\n\n")
    assert SYSTEM_PROMPT in chat
    assert user_prompt(ex.metadata, ex.current.text, ex.conditions) in chat
    assert chat.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert out.usage["mmu_prompt_tokens"] == len(row)
    assert out.usage["answer"] == PAGE0


def test_t2i_pass_draws_the_model_description_with_guidance_against_the_empty_prompt(mmada):
    tokenizer = mmada.prompting.text_tokenizer
    mmada.model.calls.clear()
    out = mmada.run_one(items(mmada)[0])
    call = mmada.model.calls[1]
    assert call["guidance_scale"] == 1.5 and call["timesteps"] == 12
    assert call["temperature"] == 1.0 and call["noise_type"] == "mask"
    assert call["schedule_at_half"] == pytest.approx(math.cos(math.pi / 4))  # cosine
    assert call["seq_len"] == 1024 and call["has_generator"]
    assert call["input_ids"].shape == (1, 1025 + 1 + 1024 + 1)
    text_part = tokenizer.decode(call["input_ids"][0, :1025], skip_special_tokens=True)
    described = json.loads(PAGE0)["t2i"]
    assert text_part == described + "." + T2I_SUFFIX == out.usage["t2i_prompt"]
    assert tokenizer.decode(call["uncond_input_ids"][0, :1025], skip_special_tokens=True) == ""
    # no current image at this pass: no image codes anywhere in the conditioning
    assert int((call["input_ids"][0, :1025] >= len(tokenizer)).sum()) == 0


def test_one_call_returns_narration_image_and_speech_plan(mmada):
    out = mmada.run_one(items(mmada)[0])
    assert out.text == 'Pip tapped on the glass. "The moon fell behind the hill!" he cried.'
    assert isinstance(out.image, Image.Image) and out.image.size == (64, 64)
    assert out.plan == {
        "speech": {
            "utterance": "The moon fell behind the hill!",
            "speaker": "Pip",
            "emotion": "sad",
            "speed": "fast",
            "pitch": "high",
            "gender": "male",
        }
    }
    assert out.failures == {} and out.usage["passes"] == 2 and out.usage["repairs"] == []
    again = mmada.run_one(items(mmada)[0]).image
    assert np.array_equal(np.asarray(out.image), np.asarray(again))  # seeded per prompt


def test_seed_changes_the_image(source_tree, checkpoints, mmada):
    other = make(source_tree, checkpoints, seed=1)
    first = np.asarray(mmada.run_one(items(mmada)[0]).image, dtype=np.int16)
    second = np.asarray(other.run_one(items(other)[0]).image, dtype=np.int16)
    assert np.abs(first - second).mean() > 1


def test_repairs_and_failures_per_page(mmada):
    pages = items(mmada)
    repaired = mmada.run_one(pages[1])
    assert repaired.text == 'Lena took her lantern and ran after Pip. "Wait for me, Pip!"'
    assert repaired.plan["speech"]["emotion"] == "neutral"  # "excited" is not a label
    assert repaired.plan["speech"]["pitch"] == "normal"  # "High": exact labels only
    assert "quote inserted into the text" in repaired.usage["repairs"]
    with pytest.raises(ComponentError) as info:
        mmada.run_one(pages[2])
    assert info.value.category == "unusable_image_prompt"
    assert "Oh no, the moon is stuck" in str(info.value)
    crashed = mmada.run_one(pages[3])  # the T2I pass fails; narration and plan survive
    assert crashed.image is None and crashed.text.startswith("The moon rose again.")
    assert crashed.failures["image"].category == "model_error"
    assert "CUDA out of memory" in crashed.failures["image"].message
    assert crashed.plan["speech"]["utterance"] == "Thank you, friends!"


def test_a_short_answer_budget_truncates_the_json(source_tree, checkpoints):
    short = make(
        source_tree, checkpoints, mmu_max_new_tokens=128, mmu_block_length=64, mmu_steps=128
    )
    with pytest.raises(ComponentError) as info:
        short.run_one(items(short)[0])
    # text and quote are salvaged from the cut JSON, the t2i string never closes
    assert info.value.category == "unusable_image_prompt" and "(empty)" in str(info.value)
    assert short.model.calls[-1]["max_new_tokens"] == 128


def test_the_engine_records_each_outcome(source_tree, checkpoints, tmp_path):
    store = open_store(tmp_path / "store")
    noop_tts = installed_registry().component("tts", "noop")
    components = {"backbone": make(source_tree, checkpoints), "tts": noop_tts(seed=0)}
    result = run_job(examples=EXAMPLES, components=components, store=store)
    job = tmp_path / "job"
    assert materialize(job, result, store) == {"text": 1, "image": 2, "speech": 1}
    missing = [line.split("\t") for line in (job / "missing.txt").read_text().splitlines()]
    assert [(i, m, c) for i, m, c, _ in missing] == [
        ("2", "text", "unusable_image_prompt"),  # the official runner loses the example
        ("2", "image", "unusable_image_prompt"),
        ("2", "speech", "unusable_image_prompt"),
        ("3", "image", "model_error"),  # the T2I pass crashed: text and speech survive
    ]
    for i in (0, 1, 3):
        assert (job / "text" / str(i) / "generated.txt").is_file()
        assert (job / "speech" / str(i) / "generated.wav").is_file()
    with Image.open(job / "image" / "0" / "generated.png") as image:
        assert image.size == (64, 64)
    plans = [json.loads(line) for line in (job / "plans.jsonl").read_text().splitlines()]
    assert plans[1]["plan"]["speech"]["speaker"] == "Lena"
    assert plans[1]["usage"]["repairs"][0] == "JSON found by fenced"
    stats = result.stats["backbone/mmada"]
    assert (stats.calls, stats.loads, stats.failures) == (4, 1, 1)
    # a cached re-run loads nothing (=none: the default would retry example 3's model_error)
    again = run_job(
        examples=EXAMPLES,
        components={**components, "backbone": make(source_tree, checkpoints)},
        store=store,
        retry_failures="none",
    )
    assert (again.stats["backbone/mmada"].loads, again.stats["backbone/mmada"].cache_hits) == (0, 4)


def test_generic_package_names_resolve_to_the_configured_checkout(
    source_tree, checkpoints, tmp_path, mmada
):
    copy = shutil.copytree(source_tree, tmp_path / "another-checkout")
    other = make(copy, checkpoints)
    other.load()
    module = __import__(type(other.model).__module__)
    assert Path(module.__file__).resolve().is_relative_to(copy.resolve())
    assert other.run_one(items(other)[0]).text == mmada.run_one(items(mmada)[0]).text


def test_a_checkout_that_does_not_import_is_a_clear_load_error(source_tree, checkpoints, tmp_path):
    broken = shutil.copytree(source_tree, tmp_path / "broken")
    (broken / "models" / "__init__.py").write_text("import jaxtyping_not_installed\n")
    backbone = make(broken, checkpoints)
    with pytest.raises(ComponentError, match="cannot import MMaDA's code .*env create"):
        backbone.load()


@pytest.mark.weights
@pytest.mark.gpu
def test_real_mmada_checkpoint():
    """The real checkout (OMNISTORY_SOURCE_BACKBONE_MMADA, at 3cdb870) with
    Gen-Verse/MMaDA-8B-MixCoT and showlab/magvitv2 (about 16 GB) on a CUDA GPU, in the environment
    from `env create backbone=mmada`."""
    torch = pytest.importorskip("torch")
    source = os.environ.get("OMNISTORY_SOURCE_BACKBONE_MMADA")
    if not torch.cuda.is_available() or not source:
        pytest.skip(
            "needs a CUDA GPU, the MMaDA checkout in OMNISTORY_SOURCE_BACKBONE_MMADA and "
            "the hub (or OMNISTORY_MODEL_BACKBONE_MMADA[_VQ])"
        )
    kwargs = {
        k: os.environ[v]
        for k, v in (
            ("model", "OMNISTORY_MODEL_BACKBONE_MMADA"),
            ("vq_model", "OMNISTORY_MODEL_BACKBONE_MMADA_VQ"),
        )
        if os.environ.get(v)
    }
    backbone = MMaDA(source_dir=source, seed=0, **kwargs)
    backbone.load()
    try:
        out = backbone.run_one(items(backbone)[0])
    except ComponentError as exc:  # the model may answer badly; the category must say so
        assert exc.category in ("plan_json_error", "plan_missing_field", "unusable_image_prompt")
        return
    finally:
        backbone.unload()
    assert out.text and out.plan["speech"]["utterance"] in out.text
    assert isinstance(out.image, Image.Image) and out.image.size == (512, 512)
