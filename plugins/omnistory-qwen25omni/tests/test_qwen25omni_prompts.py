"""Pure functions: conversations, quote extraction, pass-2 JSON recovery, input-size rules."""

from __future__ import annotations

import json

import numpy as np
import pytest
from omnistory_qwen25omni import prompts
from omnistory_qwen25omni.hf import audio_token_count, expand_placeholder
from omnistory_qwen25omni.media import listening_copy, smart_size
from omnistory_qwen25omni.prompts import (
    SYSTEM_PROMPT,
    extract_quote,
    parse_page,
    pass1_messages,
    pass2_messages,
    speak_messages,
)

from omnistory_core.api import ComponentError

METADATA = {"genre": "Fantasy", "characters": [{"name": "Pip", "species": "fox"}]}
CONDITIONS = {"scene": "a dark meadow", "characters": [{"name": "Lena", "emotion": "scared"}]}
TEXT = "Lena looked out of her bedroom window."


def test_system_prompt_is_the_one_qwen_requires_for_speech():
    assert SYSTEM_PROMPT == (
        "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of "
        "perceiving auditory and visual inputs, as well as generating text and speech."
    )
    for messages in (
        pass1_messages(METADATA, TEXT, CONDITIONS),
        pass2_messages(METADATA, TEXT, CONDITIONS, "Hi!"),
        speak_messages("Hi!"),
    ):
        assert messages[0] == {
            "role": "system",
            "content": [{"type": "text", "text": SYSTEM_PROMPT}],
        }


def test_pass1_asks_for_one_line_with_the_context_then_the_picture_alone():
    system, instructions, picture = pass1_messages(METADATA, TEXT, CONDITIONS)
    assert [m["role"] for m in (system, instructions, picture)] == ["system", "user", "user"]
    (part,) = instructions["content"]
    text = part["text"]
    assert "exactly one short line of dialogue" in text
    assert "no JSON, no speaker name" in text and "Do not write narration" in text
    # metadata and condition as Python reprs, as the official runner inserts them
    assert str(METADATA) in text and str(CONDITIONS) in text and TEXT in text
    assert picture["content"] == [{"type": "image"}]


def test_pass2_gets_the_line_as_text_and_audio_and_requires_it_verbatim():
    system, instructions, line, picture = pass2_messages(METADATA, TEXT, CONDITIONS, "Wait for me!")
    text = instructions["content"][0]["text"]
    assert '"text"' in text and '"t2i"' in text and "JSON object only" in text
    assert "it must be the given line, word for word" in text
    assert text.endswith("Given line of dialogue:\n- Wait for me!")
    assert line["content"] == [
        {"type": "text", "text": "The line of dialogue as text: Wait for me!"},
        {"type": "audio"},
    ]
    assert picture["content"] == [{"type": "image"}]
    no_audio = pass2_messages(METADATA, TEXT, CONDITIONS, "Wait for me!", with_audio=False)
    assert no_audio[2]["content"] == [line["content"][0]]


def test_forced_speech_conversation_is_the_line_alone():
    assert speak_messages("Hello moon.")[1] == {
        "role": "user",
        "content": [{"type": "text", "text": "Hello moon."}],
    }


@pytest.mark.parametrize(
    ("reply", "quote"),
    [
        ('"The moon fell behind the hill!"', "The moon fell behind the hill!"),
        ("\n\n  Hurry up, Lena!  \nPip said it twice.", "Hurry up, Lena!"),
        ("'Don't be scared.'", "Don't be scared."),
        ("Come quick!", "Come quick!"),
        ('""\nShe whispered \u201cIs anyone there?\u201d softly.', "Is anyone there?"),
        ('""\nHe said "Look up!" and ran.', "Look up!"),
        ('""', ""),
        ("   \n  ", ""),
    ],
)
def test_quote_is_the_first_line_without_quote_marks(reply, quote):
    assert extract_quote(reply) == quote


PAGE = {"text": 'Pip waved. "Look!" he said.', "t2i": "a fox waving at a girl, night"}


@pytest.mark.parametrize(
    ("reply", "how"),
    [
        (json.dumps(PAGE), "json"),
        ("```json\n" + json.dumps(PAGE, indent=2) + "\n```", "fenced"),
        ("Here is the page:\n" + json.dumps(PAGE) + "\nHope it helps.", "brace_slice"),
        (
            '{"text": "Pip waved. \\"Look!\\" he said.", "t2i": "a fox waving at a girl, night",}',
            "fields",
        ),
        (
            '"text": "Pip waved. \\"Look!\\" he said.", "t2i": "a fox waving at a girl, night"',
            "fields",
        ),
    ],
)
def test_pass2_json_is_recovered(reply, how):
    page = parse_page(reply)
    assert page.ok, page
    assert (page.text, page.t2i, page.how) == (PAGE["text"], PAGE["t2i"], how)


def test_pass2_wrapped_bare_pairs():
    page = parse_page('"text": "A page.", "t2i": ["not", "a", "string"]')
    assert page.how == "wrapped" and page.category == "plan_missing_field"


@pytest.mark.parametrize(
    ("reply", "category", "needle"),
    [
        ("The fox ran home.", "plan_json_error", "no parseable JSON"),
        ("", "plan_json_error", "no parseable JSON"),
        ('{"text": "A page."}', "plan_missing_field", "t2i"),
        ('{"text": "  ", "t2i": "x"}', "plan_missing_field", "text"),
        ("[1, 2]", "plan_json_error", "no parseable JSON"),
    ],
)
def test_pass2_failures_are_categorised(reply, category, needle):
    page = parse_page(reply)
    assert not page.ok and page.text is None and page.t2i is None
    assert page.category == category and needle in page.message


def test_image_resize_rule_of_qwen_omni_utils():
    assert smart_size(1024, 1024) == (1036, 1036)  # multiples of 28
    assert smart_size(28, 28) == (56, 56)  # at least 4 x 28 x 28 pixels
    h, w = smart_size(20000, 20000)
    assert h * w <= 16384 * 28 * 28 and h % 28 == 0 and w % 28 == 0


def test_placeholders_expand_per_input():
    text = "a<|IMAGE|>b<|IMAGE|>c"
    assert expand_placeholder(text, "<|IMAGE|>", [2, 1]) == "a<|IMAGE|><|IMAGE|>b<|IMAGE|>c"
    with pytest.raises(ComponentError, match="2 <|IMAGE|> placeholder"):
        expand_placeholder(text, "<|IMAGE|>", [1])
    # 3000 mel frames (30 s) -> 750 audio tokens, as the processor counts them
    assert audio_token_count(3000) == 750
    assert audio_token_count(100) == 25


def test_pass2_hears_the_speech_at_16_khz_after_a_16_bit_round_trip():
    t = np.arange(24000, dtype=np.float32) / 24000
    heard = listening_copy(0.5 * np.sin(2 * np.pi * 200 * t), 24000)
    assert heard.dtype == np.float32 and abs(len(heard) - 16000) <= 1
    assert 0.45 < float(np.abs(heard).max()) < 0.55


def test_prompts_module_has_no_heavy_imports():
    import subprocess
    import sys

    code = (
        "import sys, omnistory_qwen25omni.plugin, omnistory_qwen25omni.prompts;"
        "heavy = [m for m in ('torch', 'transformers', 'openai') if m in sys.modules];"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert prompts.PASS1_INSTRUCTIONS  # our own wording exists
