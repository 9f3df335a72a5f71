"""Pure functions: the understanding prompt, reading the Chat answer, the quote repair, the speech
plan and the image token layout."""

from __future__ import annotations

import pytest
from omnistory_emu3 import prompting
from omnistory_emu3.layout import check_layout, image_sequence_length, next_token_kind
from omnistory_emu3.prompting import (
    ChatOutputError,
    chat_prompt,
    check_voice,
    condition_summary,
    insert_quote,
    metadata_summary,
    parse_chat_output,
    read_chat_answer,
    speech_plan,
    strip_wrapping_quotes,
)

METADATA = {
    "genre": "Fantasy",
    "topic": "A girl and a fox help the moon",
    "style": "flat shapes",
    "characters": [{"name": n} for n in ("Lena", "Pip", "Moon", "Owl", "Bat", "Frog")],
}
CONDITIONS = {
    "scene": "a dark meadow",
    "text_instruction": "Lena admits her fear.",
    "ambient_sound": "an owl hooting",
    "characters": [
        {"name": "Lena", "emotion": "scared", "action": "holds a lantern", "speech_intent": "x"},
        {"name": "Pip", "emotion": "", "action": "bounds ahead"},
        {"name": "Moon", "emotion": "proud"},
        {"name": "Owl", "emotion": "sleepy", "action": "hoots"},
    ],
}


def test_metadata_summary_selects_like_the_official_runner():
    assert metadata_summary(METADATA) == (
        "A girl and a fox help the moon",  # no title: the topic
        "Fantasy",  # genre before style
        "Lena, Pip, Moon, Owl, Bat",  # at most five names
    )
    titled = {**METADATA, "title": "Lost Moon", "genre": "", "characters": ["Ann", {"x": 1}]}
    assert metadata_summary(titled) == ("Lost Moon", "flat shapes", "Ann")
    assert metadata_summary(None) == ("untitled", "children's picture book", "not given")


def test_condition_summary_keeps_scene_goal_mood_and_three_character_states():
    text = condition_summary(CONDITIONS)
    assert text.splitlines() == [
        "Scene: a dark meadow",
        "Narrative goal: Lena admits her fear.",
        "Ambient mood: an owl hooting",
        "Character states: Lena (feeling scared): holds a lantern; Pip: bounds ahead; "
        "Moon (feeling proud)",
    ]
    assert "Owl" not in text and "speech" not in text
    assert condition_summary({}) == prompting.NO_CONDITION
    assert condition_summary(None) == prompting.NO_CONDITION


def test_chat_prompt_is_instructions_then_the_story_summary():
    text = chat_prompt(METADATA, "  Lena looked out.  ", CONDITIONS)
    instructions, summary = text.split("\n\n", 1)
    assert instructions == prompting.INSTRUCTIONS
    for key in ('"text"', '"t2i"', '"quote"'):
        assert key in instructions
    assert "Title: A girl and a fox help the moon\nStyle: Fantasy\n" in summary
    assert "Text of the current page:\nLena looked out.\n" in summary
    assert "Scene: a dark meadow" in summary
    assert summary.endswith("(keys text, t2i, quote).")


def test_upstream_layout_wraps_the_request_like_the_upstream_processor():
    assert prompting.upstream_chat_layout("<image>", "Hi") == (
        "You are a helpful assistant. USER: <image>Hi. ASSISTANT:"
    )


ANSWER = {"text": "Pip ran.", "t2i": "a fox", "quote": "Come!"}


@pytest.mark.parametrize(
    ("raw", "method"),
    [
        ('{"text": "Pip ran.", "t2i": "a fox", "quote": "Come!"}', "json"),
        ('Sure!\n```json\n{"text": "Pip ran.", "t2i": "a fox", "quote": "Come!"}\n```', "fenced"),
        ('Here: {"text": "Pip ran.", "t2i": "a fox", "quote": "Come!"} done', "brace_slice"),
        ('"text": "Pip ran.", "t2i": "a fox", "quote": "Come!", "oops', "salvaged"),
    ],
)
def test_parse_chat_output_ladder(raw, method):
    parsed = parse_chat_output(raw)
    assert parsed.method == method
    assert {k: parsed.values[k] for k in ANSWER} == ANSWER


def test_parse_salvages_single_keys_and_unescapes_them():
    parsed = parse_chat_output('{"text": "He said \\"hi\\".", "t2i": broken')
    assert parsed.method == "salvaged" and parsed.values == {"text": 'He said "hi".'}


@pytest.mark.parametrize("raw", ["", "   ", "no json at all", "[1, 2]", None, 3])
def test_unreadable_answers_are_plan_json_errors(raw):
    assert parse_chat_output(raw).method is None
    with pytest.raises(ChatOutputError) as info:
        read_chat_answer(raw)
    assert info.value.category == "plan_json_error"


@pytest.mark.parametrize(
    ("raw", "missing"),
    [
        ('{"text": "Pip ran.", "t2i": "a fox"}', "quote"),
        ('{"text": "", "t2i": "a fox", "quote": "Hi"}', "text"),
        ('{"text": "Pip ran.", "t2i": ["a fox"], "quote": "Hi"}', "t2i"),
        ('{"text": "Pip ran.", "t2i": "a fox", "quote": "\\"\\""}', "quote"),
        ('"text": "Pip ran."', "t2i, quote"),
    ],
)
def test_answers_without_text_t2i_or_quote_are_plan_missing_field(raw, missing):
    with pytest.raises(ChatOutputError, match=f"lacks {missing} ") as info:
        read_chat_answer(raw)
    assert info.value.category == "plan_missing_field"


def test_read_chat_answer_records_repairs():
    result = read_chat_answer('```\n{"text": "Pip ran", "t2i": " a fox ", "quote": "“Come!”"}\n```')
    assert (result.text, result.t2i, result.quote) == ('Pip ran. "Come!"', "a fox", "Come!")
    assert result.repairs == ["strip_code_fence", "strip_quote_marks", "quote_appended"]
    clean = read_chat_answer('{"text": "Pip said \\"Come!\\"", "t2i": "a fox", "quote": "Come!"}')
    assert clean.repairs == [] and clean.text == 'Pip said "Come!"'


def test_strip_wrapping_quotes_removes_one_pair():
    assert strip_wrapping_quotes(' "Hi!" ') == "Hi!"
    assert strip_wrapping_quotes("\u2018Hi\u2019") == "Hi"
    assert strip_wrapping_quotes("'\"Hi\"'") == '"Hi"'
    assert strip_wrapping_quotes("Don't") == "Don't"


def test_insert_quote_follows_the_official_rules():
    assert insert_quote(' Pip said "Come!" ', "Come!") == ('Pip said "Come!"', None)
    assert insert_quote('Pip said "Go." and ran.', "Come!") == (
        'Pip said "Come!" and ran.',
        "quote_replaced_span",
    )
    assert insert_quote("Pip said \u201cGo.\u201d", "Come!") == (
        'Pip said "Come!"',
        "quote_replaced_span",
    )
    assert insert_quote("Pip ran!", "Come!") == ('Pip ran! "Come!"', "quote_appended")
    assert insert_quote("Pip ran", "Come!") == ('Pip ran. "Come!"', "quote_appended")
    # an apostrophe is not a quotation
    assert insert_quote("Pip's tail swished.", "Come!")[1] == "quote_appended"


def test_voice_defaults_to_the_official_speaker_and_validates_labels():
    assert check_voice(None) == {
        "speaker": "Narrator",
        "emotion": "neutral",
        "speed": "normal",
        "pitch": "normal",
        "gender": "female",
    }
    assert check_voice({"gender": "male"})["gender"] == "male"
    with pytest.raises(ValueError, match="emotion must be one of"):
        check_voice({"emotion": "scared"})
    with pytest.raises(ValueError, match="unknown key"):
        check_voice({"line": "x"})
    with pytest.raises(ValueError, match="speaker must be"):
        check_voice({"speaker": " "})
    plan = speech_plan("Come!", check_voice(None))
    assert plan == {"speech": {"utterance": "Come!", **check_voice(None)}}


def test_image_token_layout():
    # 2 rows of 3 visual tokens, each closed by an end-of-line, then eof, eoi, eos, padding
    kinds = [next_token_kind(i, 2, 3) for i in range(1, 13)]
    assert kinds == ["visual"] * 3 + ["eol"] + ["visual"] * 3 + ["eol", "eof", "eoi", "eos", "pad"]
    assert image_sequence_length(2, 3) == 11
    assert image_sequence_length(90, 90) == 8193
    assert check_layout(kinds, 2, 3) is None
    assert "stopped after 5" in check_layout(kinds[:5], 2, 3)
    assert "token 4 is visual, expected eol" in check_layout(["visual"] * 11, 2, 3)
    with pytest.raises(ValueError):
        next_token_kind(0, 2, 3)
