"""Prompt construction and answer parsing: pure functions, no model."""

from __future__ import annotations

import json

import pytest
from omnistory_anygpt import prompts as P
from omnistory_anygpt.parsing import (
    assistant_payload,
    media_segments,
    media_tags,
    parse_text_answer,
    segment_codes,
    strip_media,
)

METADATA = {
    "genre": "fable",
    "topic": "friendship",
    "style": "watercolour",
    "narrative_tense": "present",
    "narrative_perspective": "third person",
    "characters": [{"name": "Pip", "sex": "male"}],
}
CONDITIONS = {
    "characters": [{"name": "Pip", "emotion": "happy", "speech_intent": "shows the kite"}],
    "scene": "a meadow",
    "text_instruction": "Pip finds a kite.",
    "ambient_sound": "wind",
}


def fields() -> P.StoryFields:
    return P.story_fields("  Pip walks to the meadow.\n", METADATA, CONDITIONS)


# -- prompts ---------------------------------------------------------------------------------
def test_condition_renames_text_instruction_in_place() -> None:
    shown = P.condition_for_prompt(CONDITIONS)
    assert list(shown) == ["characters", "scene", "text content", "ambient_sound"]
    assert shown["text content"] == "Pip finds a kite."
    assert "text_instruction" not in shown
    assert P.condition_for_prompt(None) == {}


def test_story_fields_are_the_stripped_text_and_two_json_blocks() -> None:
    f = fields()
    assert f.current_text == "Pip walks to the meadow."
    assert json.loads(f.metadata_json) == METADATA
    assert list(json.loads(f.condition_json)) == [
        "characters",
        "scene",
        "text content",
        "ambient_sound",
    ]
    # non-ASCII stays readable, as json.dumps(ensure_ascii=False)
    assert "é" in P.story_fields("x", {"topic": "café"}, {}).metadata_json


def test_text_instruction_asks_for_two_labelled_lines_then_the_context() -> None:
    text = P.text_instruction(fields())
    assert "exactly two lines" in text
    assert "'Narration:'" in text and "'Speech:'" in text
    assert "3 to 12 words" in text and "one or two short sentences" in text
    example = text.split("For example:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert example[0].startswith("Narration: ") and example[1].startswith("Speech: ")
    # the context follows in the runner's order: current text, metadata, condition
    order = [
        text.index(f.strip())
        for f in (fields().current_text, fields().metadata_json, fields().condition_json)
    ]
    assert order == sorted(order)
    assert text.rstrip().endswith(fields().condition_json)


def test_image_instruction_carries_narration_and_line_or_the_condition() -> None:
    f = fields()
    full = P.image_instruction(f, "Pip finds a kite.", "Look at this!")
    assert "Narration of the next page:\nPip finds a kite." in full
    assert "Look at this!" in full
    assert full.index("Text of the current page") < full.index("Narration of the next page")
    assert full.index("Look at this!") < full.index("Book metadata")
    bare = P.image_instruction(f, "", "")
    # no narration: the condition JSON stands in for it; no line: no line section at all
    assert f"Narration of the next page:\n{f.condition_json}" in bare
    assert "says in this scene" not in bare


def test_speech_instruction_reads_the_line_or_asks_to_invent_one() -> None:
    f = fields()
    given = P.speech_instruction(f, "Pip finds a kite.", "Look at this!")
    assert "Say exactly this line:\nLook at this!" in given
    invented = P.speech_instruction(f, "Pip finds a kite.", "")
    assert "Say exactly" not in invented and "Make up one short line" in invented
    assert "speech audio only" in given


def test_image_tokens_come_first_in_the_user_message() -> None:
    message = P.with_image("<soim><👀1><eoim>", "Draw it.")
    assert message == "<soim><👀1><eoim>\nDraw it."


# -- reading answers -------------------------------------------------------------------------
def test_payload_is_what_follows_the_role_tag_up_to_the_final_end_tag() -> None:
    decoded = 'Sys\n[Human]: hi<eoh>\n[MMGPT]: Narration: A.\nSpeech: "B!"<eos>'
    assert assistant_payload(decoded) == 'Narration: A.\nSpeech: "B!"'
    # no final end tag (the budget ran out): everything after the last role tag
    assert assistant_payload("x [MMGPT]: one [MMGPT] : two <eos> tail") == "two <eos> tail"
    assert assistant_payload("no tag at all") == "no tag at all"


def test_media_runs_codes_and_stripping() -> None:
    answer = "<soim><👀5><👀17><eoim> and <soim><👀2><eoim><sosp><🗣️9><eosp> <soim><👀1>"
    assert media_segments(answer, "image") == ["<👀5><👀17>", "<👀2>"]  # the open run is not one
    assert segment_codes("<👀5><👀17>") == [5, 17]
    assert segment_codes("<🗣️9><🗣️0>") == [9, 0]
    assert media_segments(answer, "speech") == ["<🗣️9>"]
    assert strip_media(": x <soim><👀1><eoim> y") == "x   y"
    tags = media_tags({"image": {"sos": "<a>", "eos": "</a>", "prefix": "?"}})
    assert media_segments("<a>1</a>", "image", tags) == ["1"]


def test_official_mode_keeps_a_speech_line_inside_the_narration() -> None:
    # the runner collapses newlines before looking for labels: only a label at the very start
    # counts, the spoken line comes from the quoted span, which is cut out of the narration
    answer = 'Narration: Pip finds a red kite.\nSpeech: "Look what I found!"'
    assert parse_text_answer(answer) == ("Pip finds a red kite. Speech:", "Look what I found!")
    # unquoted: no spoken line at all, the narration holds both lines
    assert parse_text_answer("Narration: Pip runs.\nSpeech: Wait for me!") == (
        "Pip runs. Speech: Wait for me!",
        "",
    )


def test_lines_mode_finds_both_labels() -> None:
    answer = 'Narration: Pip finds a red kite.\nIt is big.\nSpeech: "Look what I found!"'
    assert parse_text_answer(answer, mode="lines") == (
        "Pip finds a red kite. It is big.",
        "Look what I found!",
    )


@pytest.mark.parametrize("mode", ["official", "lines"])
def test_json_answers(mode: str) -> None:
    answer = '{"narration": "Pip flies the kite.", "speech": "Up it goes!"}'
    assert parse_text_answer(answer, mode=mode) == ("Pip flies the kite.", "Up it goes!")
    answer = '{"narration": "Pip flies the kite.", "speech_text": "Higher!"}'
    assert parse_text_answer(answer, mode=mode) == ("Pip flies the kite.", "Higher!")
    # a JSON value that is not text is not used (and does not raise)
    narration, _ = parse_text_answer('{"narration": 3}', mode=mode)
    assert narration != "3" and "3" in narration


@pytest.mark.parametrize("mode", ["official", "lines"])
def test_a_speech_label_at_the_start_and_the_last_quoted_span(mode: str) -> None:
    assert parse_text_answer("Speech: Hello there", mode=mode) == ("Hello there", "Hello there")
    said = parse_text_answer("Pip said 'hi' and then \u201cbye now\u201d.", mode=mode)
    assert said == ("Pip said 'hi' and then .", "bye now")


def test_line_fallback_and_whole_text_fallback() -> None:
    # no labels, no quotes: first line narration, second line spoken (lines mode keeps lines)
    assert parse_text_answer("Pip runs home.\nWait for me", mode="lines") == (
        "Pip runs home.",
        "Wait for me",
    )
    # official mode sees one line: the narration is all of it, no spoken line
    assert parse_text_answer("Pip runs home.\nWait for me") == ("Pip runs home. Wait for me", "")
    # media runs are cut out; nothing left -> empty narration
    assert parse_text_answer("<soim><👀1><eoim>") == ("", "")


def test_quotes_and_task_talk_are_removed_from_the_narration() -> None:
    narration, _ = parse_text_answer('Narration: "Pip waves."')
    assert narration == "Pip waves."
    narration, _ = parse_text_answer("Here is the narration. Pip waves at the ducks.")
    assert narration == "Pip waves at the ducks."
    narration, _ = parse_text_answer("Describe the scene: Pip waves.")  # one sentence: kept
    assert narration == "Describe the scene: Pip waves."


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        parse_text_answer("x", mode="json")
