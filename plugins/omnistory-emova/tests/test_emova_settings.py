"""Configuration, prompts and reply parsing of ``backbone=emova`` (no model needed)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from omnistory_emova.backbone import (
    EMOVA_REQUIREMENTS,
    SYSTEM_PROMPT,
    TTS_TASK_PREFIX,
    Emova,
    parse_reply,
    pass1_messages,
    pass1_prompt,
    pass2_messages,
)
from omnistory_testkit import demo_examples

from omnistory_core.api import ComponentError, ConfigError


def demo_item(index: int = 0) -> dict:
    example = demo_examples(index + 1)[index]
    return {
        "current_text": example.current.text,
        "metadata": example.metadata,
        "conditions": example.conditions,
    }


def test_plugin_import_stays_light():
    code = (
        "import sys, omnistory_emova.plugin;"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_defaults_follow_the_official_runner():
    emova = Emova(seed=0)
    s = emova.settings
    assert (s.model, s.speech_tokenizer) == (
        "Emova-ollm/emova-qwen-2-5-7b-hf",
        "Emova-ollm/emova_speech_tokenizer_hf",
    )
    assert (s.max_new_tokens, s.no_repeat_ngram_size, s.speech_max_new_tokens) == (1024, 6, 4096)
    assert (s.speaker, s.dtype, s.attn_implementation) == ("female", "bfloat16", "sdpa")
    assert Emova.produces == frozenset({"text", "speech"})
    assert Emova.reads == ("current_image", "current_text", "metadata", "conditions")
    assert "transformers==4.47.1" in EMOVA_REQUIREMENTS and "torch==2.4.0" in EMOVA_REQUIREMENTS
    assert Emova.requirements == EMOVA_REQUIREMENTS


def test_shipped_yaml_holds_only_the_environment_variables(monkeypatch):
    from importlib.resources import files

    from omegaconf import OmegaConf

    monkeypatch.delenv("OMNISTORY_MODEL_BACKBONE_EMOVA", raising=False)
    monkeypatch.delenv("OMNISTORY_MODEL_BACKBONE_EMOVA_SPEECH_TOKENIZER", raising=False)
    node = OmegaConf.load(files("omnistory_emova.conf") / "backbone" / "emova.yaml")
    cfg = OmegaConf.to_container(node, resolve=True)
    assert cfg.pop("name") == "emova"
    assert cfg == {k: Emova.defaults[k] for k in ("model", "speech_tokenizer")}


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"speaker": "child"}, "speaker"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"speech_max_new_tokens": "many"}, "speech_max_new_tokens"),
        ({"no_repeat_ngram_size": -1}, "no_repeat_ngram_size"),
        ({"dtype": "int8"}, "dtype"),
        ({"attn_implementation": "flex"}, "attn_implementation"),
        ({"model": ""}, "model"),
        ({"speech_tokenizer": None, "model": 3}, "model"),
        ({"revision": 5}, "revision"),
        ({"temperature": 0.7}, "temperature"),  # greedy only: not a parameter
    ],
)
def test_bad_parameters_are_config_errors_naming_the_parameter(params, named):
    with pytest.raises(ConfigError, match=named) as info:
        Emova(seed=0, **params)
    assert "backbone=emova" in str(info.value)


def test_unknown_key_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="known: .*speech_max_new_tokens"):
        Emova(seed=0, max_tokens=10)


def test_cache_key_holds_outputs_params_but_not_the_device():
    params = Emova(seed=0, device="cuda:1", speaker="male").output_params()
    assert "device" not in params and params["speaker"] == "male"
    assert Emova.runtime_params == ("device",)


def test_checkpoints_to_prefetch():
    assert Emova.checkpoints({}) == [
        "Emova-ollm/emova-qwen-2-5-7b-hf",
        "Emova-ollm/emova_speech_tokenizer_hf",
    ]
    assert Emova.checkpoints({"model": "/m", "speech_tokenizer": "/s"}) == ["/m", "/s"]


def test_pass1_prompt_carries_the_official_inputs():
    item = demo_item()
    prompt = pass1_prompt(item)
    assert item["current_text"] in prompt
    assert json.dumps(item["conditions"]["scene"], ensure_ascii=False) in prompt
    assert item["conditions"]["text_instruction"] in prompt
    assert item["metadata"]["topic"] in prompt and "Pip" in prompt
    for key in ('"text"', '"quote"', '"t2i"'):
        assert key in prompt
    messages = pass1_messages(item)
    assert messages[0] == {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]}
    assert messages[1]["content"][0] == {"type": "image"}  # the current page, before the text
    assert messages[1]["content"][1] == {"type": "text", "text": prompt}


def test_pass1_prompt_tolerates_missing_inputs():
    prompt = pass1_prompt({})
    assert "Current page text:\n\n" in prompt and "{}" in prompt


def test_pass2_is_text_only_with_the_quote():
    messages = pass2_messages("Hurry, Lena!")
    assert messages[1]["content"] == [{"type": "text", "text": TTS_TASK_PREFIX + "Hurry, Lena!"}]
    assert all(part["type"] == "text" for m in messages for part in m["content"])


GOOD = {"text": "Pip knocked.", "quote": "Come quick!", "t2i": "a fox at a window"}


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps(GOOD),
        "```json\n" + json.dumps(GOOD, indent=2) + "\n```",
        "Here is the page: " + json.dumps(GOOD) + " I hope it helps.",
        "  \n" + json.dumps({**GOOD, "text": "  Pip knocked.  ", "extra": 1}),
    ],
)
def test_reply_parsing_accepts_json_fences_and_brace_slices(raw):
    reply = parse_reply(raw)
    assert (reply.text, reply.quote, reply.t2i) == (
        "Pip knocked.",
        "Come quick!",
        "a fox at a window",
    )


def test_the_narration_is_not_forced_to_hold_the_quote():
    reply = parse_reply(json.dumps(GOOD))
    assert reply.quote not in reply.text and reply.text == "Pip knocked."


@pytest.mark.parametrize(
    ("obj", "missing"),
    [
        ({"text": "a", "quote": "b"}, "t2i"),
        ({"text": "a", "quote": "  ", "t2i": "c"}, "quote"),
        ({"quote": "b", "t2i": "c", "text": None}, "text"),
        ({"text": ["a"], "quote": "b", "t2i": "c"}, "text"),
    ],
)
def test_missing_fields_fail_the_example(obj, missing):
    with pytest.raises(ComponentError, match=f"no usable {missing}") as info:
        parse_reply(json.dumps(obj))
    assert info.value.category == "plan_missing_field"


@pytest.mark.parametrize("raw", ["", "Pip knocks on the window.", '["text"]', "{text: 'a'}"])
def test_no_json_object_fails_the_example(raw):
    with pytest.raises(ComponentError) as info:
        parse_reply(raw)
    assert info.value.category == "plan_json_error"
