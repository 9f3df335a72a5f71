"""Pure parts of backbone=dynin: the prompt, the seed, the token layout, the decoding helpers,
the vLLM-Omni request/response shapes, and parameter validation (no torch, no model)."""

from __future__ import annotations

import base64
import json

import pytest
from dynin_fake_omni import NARRATION, NO_IMAGE_TEXT, completion
from omnistory_dynin import layout as L
from omnistory_dynin.backbone import DYNIN_REQUIREMENTS, DyninOmni, assemble
from omnistory_dynin.prompts import (
    build_prompt,
    example_seed,
    next_page_condition,
    story_metadata,
)
from omnistory_dynin.remote import interpret, parse_response, request_kwargs
from omnistory_testkit import demo_examples, media

from omnistory_core.api import Audio, ConfigError, Failure


@pytest.fixture(scope="module")
def demo():
    return demo_examples()[:3]


def item_of(example) -> dict:
    return {
        "current_image": media(example.current.image),
        "current_text": example.current.text,
        "metadata": example.metadata,
        "conditions": example.conditions,
    }


# -- prompt ----------------------------------------------------------------------------------------
def test_prompt_sections_follow_the_runner(demo):
    ex = demo[0]
    prompt = build_prompt(ex.metadata, ex.current.text, ex.conditions)
    heads = [
        "Book metadata:\n- ",
        "Text of the current page:\n- ",
        "Conditions for the next page:\n- ",
    ]
    positions = [prompt.index(h) for h in heads]
    assert positions == sorted(positions)
    assert "exactly one line of character dialogue" in prompt
    book = json.loads(prompt.split(heads[0], 1)[1].split("\n\n", 1)[0])
    assert list(book) == [
        "genre",
        "topic",
        "style",
        "narrative_tense",
        "narrative_perspective",
        "characters",
    ]
    assert book["characters"] == ex.metadata["characters"]
    assert prompt.split(heads[1], 1)[1].split("\n\n", 1)[0] == ex.current.text
    condition = json.loads(prompt.split(heads[2], 1)[1])
    assert list(condition) == ["characters", "scene", "text content", "ambient_sound"]
    assert condition["text content"] == ex.conditions["text_instruction"]
    assert condition["characters"] == ex.conditions["characters"]


def test_prompt_keeps_non_ascii_and_tolerates_missing_fields():
    prompt = build_prompt({"genre": "Fábula"}, "Ça va ?", {"scene": "the café"})
    assert "Fábula" in prompt and "Ça va ?" in prompt and "the café" in prompt
    assert story_metadata(None)["characters"] == []
    assert next_page_condition(None) == {
        "characters": [],
        "scene": "",
        "text content": "",
        "ambient_sound": "",
    }


def test_seed_is_base_plus_a_stable_hash_of_the_inputs(demo):
    a, b = item_of(demo[0]), item_of(demo[1])
    assert example_seed(20261006, a) == example_seed(20261006, dict(a))
    assert example_seed(20261006, a) != example_seed(20261006, b)
    offset = example_seed(0, a)
    assert 0 <= offset < 2**32
    assert example_seed(20261006, a) == 20261006 + offset
    changed = {**a, "current_text": a["current_text"] + " "}
    assert example_seed(20261006, changed) != example_seed(20261006, a)


# -- layout ----------------------------------------------------------------------------------------
def _encode(text: str) -> list[int]:
    table = {"emotion: ": [901, 902], "speed: ": [903, 902], "pitch: ": [904, 902]}
    table |= {"gender: ": [905, 902], "\n": [906]}
    return table[text]


def test_sequence_layout_matches_the_runner():
    lay = L.parse_layout({"task_id": 50, "soi_id": 51, "eoi_id": 52, "soa_id": 53, "eoa_id": 54})
    built = L.build_sequence(
        source_codes=[0, 1, 2, 3],
        prompt_ids=[10, 11, 12],
        bos_id=1,
        eos_id=2,
        pad_id=0,
        mask_id=99,
        encode=_encode,
        layout=lay,
        text_vocab=1000,
        prompt_length=8,
        text_length=3,
        speech_length=4,
        expected_source_codes=4,
    )
    ids = built.ids
    assert ids[:7] == [50, 51, 1000, 1001, 1002, 1003, 52]
    assert ids[7:15] == [0, 0, 0, 1, 10, 11, 12, 2]  # 3 pads, <bos> prompt <eos>
    assert built.pad_start == 7 and built.pad_count == 3 and built.prompt_tokens == 5
    assert ids[15] == 51 and ids[slice(*built.spans["image"])] == [99] * 4
    assert ids[20:22] == [52, 1] and built.spans["text"] == (22, 24)
    assert ids[24] == 53 and built.spans["speech"] == (25, 28)
    assert ids[28:] == [901, 902, 99, 906, 903, 902, 99, 906, 904, 902, 99, 906, 905, 902, 99, 906]
    assert [built.spans[f] for f in L.TAIL_FIELDS] == [(30, 31), (34, 35), (38, 39), (42, 43)]
    attention = built.attention()
    assert attention[7:10] == [False] * 3 and all(attention[:7]) and all(attention[10:])


def test_sequence_layout_refuses_what_the_runner_refuses():
    kwargs = dict(
        source_codes=[0] * 4,
        prompt_ids=[10] * 6,
        bos_id=1,
        eos_id=2,
        pad_id=0,
        mask_id=99,
        encode=_encode,
        layout=L.OFFICIAL_LAYOUT,
        text_vocab=1000,
        prompt_length=8,
        text_length=3,
        speech_length=4,
    )
    with pytest.raises(L.LayoutError, match="prompt exceeds 8 tokens: 9"):
        L.build_sequence(**{**kwargs, "prompt_ids": [10] * 7})
    with pytest.raises(L.LayoutError, match="expected 441 source image codes, found 4"):
        L.build_sequence(**kwargs, expected_source_codes=441)
    small = L.parse_layout({"max_sequence_length": 20})
    with pytest.raises(L.LayoutError, match="sequence exceeds the model context"):
        L.build_sequence(**{**kwargs, "layout": small})


def test_decoding_helpers():
    assert L.text_until_eos([5, 6, 2, 7, 2], 2) == [5, 6]
    assert L.text_until_eos([5, 6], 2) == [5, 6]
    assert L.image_codes([1000, 1063], 1000) == [0, 63]
    ids = [9200, 5, 9201, 13287, 13288, 9199, 126098, 9300]
    assert L.speech_codes(ids, base=9192, size=4096, stop_ids=(126098, 2)) == [8, 9, 4095, 7]
    assert L.speech_codes([9200, 2, 9201], base=9192, size=4096, stop_ids=(126098, 2)) == [8]
    assert L.speech_units([12, 7]) == "<|speech_12|><|speech_7|>"
    spans = {"emotion": (0, 1), "speed": (1, 2), "pitch": (2, 3), "gender": (3, 4)}
    words = {1: " happy", 2: "fast ", 3: "high", 4: "male"}
    decode = lambda ids: "".join(words[i] for i in ids)  # noqa: E731
    assert L.tail_values([1, 2, 3, 4], spans, decode) == {
        "emotion": "happy",
        "speed": "fast",
        "pitch": "high",
        "gender": "male",
    }


def test_official_layout_and_overrides():
    assert L.OFFICIAL_LAYOUT.task_id == 126107
    assert (L.OFFICIAL_LAYOUT.soi_id, L.OFFICIAL_LAYOUT.eoi_id) == (126084, 126085)
    assert (L.OFFICIAL_LAYOUT.soa_id, L.OFFICIAL_LAYOUT.eoa_id) == (126097, 126098)
    assert L.parse_layout(None) is L.OFFICIAL_LAYOUT
    assert L.parse_layout({"tokenizer_length": None}).tokenizer_length is None
    for bad, match in (
        ({"task": 1}, "unknown key"),
        ({"task_id": -1}, "task_id"),
        ({"image_codebook_size": 0}, "image_codebook_size"),
        ([1, 2], "mapping"),
    ):
        with pytest.raises(ValueError, match=match):
            L.parse_layout(bad)


# -- vLLM-Omni request and response ---------------------------------------------------------------
def test_request_carries_page_prompt_modalities_seed_and_extra_body(demo):
    from omnistory_dynin.params import check_params

    item = item_of(demo[0])
    p = check_params({"backend": "vllm_omni", "extra_body": {"additional_information": {"a": 1}}})
    kwargs = request_kwargs(p, item)
    assert kwargs["model"] == "snu-aidas/Dynin-Omni_nips"
    assert kwargs["modalities"] == ["text", "image", "audio"]
    assert kwargs["seed"] == example_seed(20261006, item)
    assert kwargs["extra_body"] == {"additional_information": {"a": 1}}
    (message,) = kwargs["messages"]
    image, text = message["content"]
    url = image["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == item["current_image"].read_bytes()
    assert text == {
        "type": "text",
        "text": build_prompt(item["metadata"], item["current_text"], item["conditions"]),
    }
    served = check_params({"backend": "vllm_omni", "served_model": "dynin"})
    assert request_kwargs(served, item)["model"] == "dynin"
    assert "extra_body" not in request_kwargs(served, item)


def test_response_parsing_reads_one_choice_per_modality():
    found = parse_response(completion("full", "m"))
    assert found["text"] == [NARRATION]
    assert found["image"][0].startswith(b"\x89PNG")
    assert found["audio"][0][:4] == b"RIFF"
    results = interpret(found)
    assert results["text"] == NARRATION
    assert results["image"].size == (48, 48)
    assert isinstance(results["speech"], Audio) and results["speech"].sample_rate == 24000


def test_response_parsing_never_takes_a_placeholder_for_narration():
    found = parse_response(completion("image_placeholder", "m"))
    assert found["text"] == [NARRATION] and found["image"] == []
    assert NO_IMAGE_TEXT not in found["text"]
    results = interpret(parse_response(completion("text_only", "m")))
    assert results["image"].category == "backbone_no_image"
    assert results["speech"].category == "backbone_no_speech"
    empty = interpret(parse_response({"choices": []}))
    assert empty["text"].category == "backbone_no_text"
    bad = interpret({"text": ["x"], "image": [b"not a png"], "audio": [b"nope"], "problems": []})
    assert bad["image"].category == "model_error" and bad["speech"].category == "model_error"


# -- all or nothing -------------------------------------------------------------------------------
def test_all_or_nothing_discards_the_survivors():
    speech = Failure("empty_output", "speech ended after 3 codes (at least 8 are needed)")
    results = {"text": "A page.", "image": b"png", "speech": speech}
    kept = assemble(dict(results), {}, all_or_nothing=False)
    assert (kept.text, kept.image, kept.speech) == ("A page.", b"png", None)
    assert kept.failures == {"speech": speech}
    usage: dict = {}
    lost = assemble(dict(results), usage, all_or_nothing=True)
    assert (lost.text, lost.image, lost.speech) == (None, None, None)
    assert lost.failures["speech"] == speech
    for modality in ("text", "image"):
        failure = lost.failures[modality]
        assert failure.category == "empty_output"
        assert (
            "all_or_nothing=true" in failure.message and "speech ended after 3" in failure.message
        )
    assert usage["discarded"] == ["image", "text"] and usage["failed_first"] == "speech"


# -- parameters -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"stepz": 4}, "backbone=dynin: unknown parameter(s) stepz; known: "),
        ({"backend": "vllm"}, "backend must be one of ['transformers', 'vllm_omni']"),
        ({"steps": 0}, "steps must be >= 1, got 0"),
        ({"text_length": 1}, "text_length must be >= 2, got 1"),
        ({"speech_style": "female"}, "backbone.speech_style must be an EMOVA style string"),
        ({"all_or_nothing": "yes"}, "all_or_nothing must be true or false, got 'yes'"),
        ({"seed": -1}, "seed must be >= 0, got -1"),
        ({"dtype": "fp8"}, "dtype must be one of ['auto'"),
        ({"token_layout": {"soi": 1}}, "backbone.token_layout: unknown key(s) soi"),
        ({"base_url": "localhost:8091"}, "backbone.base_url must be null or an http(s) URL"),
        ({"launch_port": 70000}, "launch_port must be <= 65535, got 70000"),
        ({"extra_body": [1]}, "extra_body must be a mapping or null, got [1]"),
        ({"image_resolution": 330}, "backbone.image_resolution must be a multiple of 16"),
    ],
)
def test_bad_parameters_are_one_line(params, message):
    with pytest.raises(ConfigError) as info:
        DyninOmni(**{"backend": "vllm_omni", **params})
    assert message in str(info.value) and "\n" not in str(info.value)


def test_transformers_backend_needs_a_checkout(tmp_path):
    with pytest.raises(ConfigError, match="backbone.source_dir is not set") as info:
        DyninOmni()
    assert "git clone https://github.com/AIDASLab/Dynin-Omni.git" in str(info.value)
    assert "checkout d6e3ca8" in str(info.value)
    with pytest.raises(ConfigError, match="is not a checkout of AIDASLab/Dynin-Omni"):
        DyninOmni(source_dir=str(tmp_path))
    DyninOmni(backend="vllm_omni")  # the server holds the model code


def test_cache_key_params_follow_the_backend(source_tree):
    local = DyninOmni(source_dir=str(source_tree), device="cpu", max_concurrency=3)
    key = local.output_params()
    assert key["backend"] == "transformers" and key["steps"] == 128
    assert key["token_layout"]["task_id"] == 126107 and len(key["source_tree"]) == 64
    assert not {"source_dir", "device", "max_concurrency", "extra_body", "launch"} & set(key)
    moved = DyninOmni(source_dir=str(source_tree), device="cuda:1").output_params()
    assert moved == key  # path and device are runtime-only
    remote = DyninOmni(backend="vllm_omni", base_url="http://h:1/v1", launch_args=["--x"])
    assert remote.output_params() == {
        "backend": "vllm_omni",
        "model": "snu-aidas/Dynin-Omni_nips",
        "served_model": None,
        "extra_body": {},
        "all_or_nothing": True,
        "seed": 20261006,
    }


def test_declared_environment_is_the_official_one():
    pins = dict(r.split("==") for r in DYNIN_REQUIREMENTS if "==" in r)
    assert pins["torch"] == "2.7.1" and pins["transformers"] == "4.47.1"
    assert pins["diffusers"] == "0.32.2" and pins["torchvision"] == "0.22.1"
    assert DyninOmni.produces == frozenset({"text", "image", "speech"})
    assert DyninOmni.checkpoints({"name": "dynin", "runner": {}}) == [
        "snu-aidas/Dynin-Omni_nips",
        "snu-aidas/magvitv2",
        "snu-aidas/emova_speech_tokenizer_vllm",
    ]
    assert DyninOmni.checkpoints({"name": "dynin", "backend": "vllm_omni"}) == [
        "snu-aidas/Dynin-Omni_nips"
    ]
