"""parse_judge_response: schema validation and local normalization."""

from __future__ import annotations

import json

import pytest
from omnistory_eval.judges import CRITERIA, parse_judge_response


def answer(track: str = "text", scores=(8, 7, 6, 9), **overrides) -> dict:
    out = {
        key: {"score": score, "rationale": f"reason {n}"}
        for n, (key, score) in enumerate(zip(CRITERIA[track], scores, strict=True))
    }
    out.update(overrides)
    return out


def test_exact_json_is_accepted_directly():
    raw = json.dumps(answer())
    parsed = parse_judge_response(raw, "text")
    assert parsed.ok and parsed.method == "direct" and parsed.failure is None
    assert parsed.scores == dict(zip(CRITERIA["text"], (8, 7, 6, 9), strict=True))
    assert parsed.rationales["alignment_with_metadata"] == "reason 0"


@pytest.mark.parametrize("track", ["text", "image", "speech", "omni"])
def test_each_track_needs_its_own_keys(track):
    assert parse_judge_response(json.dumps(answer(track)), track).ok
    other = "image" if track == "text" else "text"
    wrong = parse_judge_response(json.dumps(answer(other)), track)
    assert not wrong.ok and wrong.scores is None and "missing" in wrong.failure


def test_fenced_answer_is_normalized():
    raw = "```json\n" + json.dumps(answer(), indent=2) + "\n```"
    parsed = parse_judge_response(raw, "text")
    assert parsed.ok and parsed.method == "normalized"


def test_prose_around_the_object_is_ignored():
    raw = "Here is my evaluation:\n" + json.dumps(answer("speech")) + "\nHope this helps!"
    parsed = parse_judge_response(raw, "speech")
    assert parsed.ok and parsed.scores["alignment_with_metadata"] == 8


def test_answer_cut_between_values_is_closed():
    raw = json.dumps(answer())[:-1]  # the final brace is missing
    parsed = parse_judge_response(raw, "text")
    assert parsed.ok and parsed.method == "normalized"


def test_answer_cut_inside_a_criterion_is_invalid():
    full = json.dumps(answer())
    raw = full[: full.index("semantic_consistency") + 30]
    parsed = parse_judge_response(raw, "text")
    assert not parsed.ok and parsed.method == "unresolved"
    assert "semantic_consistency_with_ground_truth" in parsed.failure


@pytest.mark.parametrize("bad", [0, 11, -3])
def test_out_of_range_scores_are_invalid_not_clamped(bad):
    parsed = parse_judge_response(json.dumps(answer(scores=(8, bad, 6, 9))), "text")
    assert not parsed.ok and parsed.scores is None
    assert f"score {bad} is outside 1-10" in parsed.failure


def test_fractional_and_boolean_scores_are_invalid():
    assert not parse_judge_response(json.dumps(answer(scores=(8, 7.5, 6, 9))), "text").ok
    assert not parse_judge_response(json.dumps(answer(scores=(8, True, 6, 9))), "text").ok


def test_integral_floats_and_numeric_strings_are_normalized():
    parsed = parse_judge_response(json.dumps(answer(scores=(8.0, "7", " 6 ", 9))), "text")
    assert parsed.ok and parsed.method == "normalized"
    assert parsed.scores == dict(zip(CRITERIA["text"], (8, 7, 6, 9), strict=True))


def test_missing_or_empty_rationale_is_invalid():
    data = answer()
    data["alignment_with_metadata"]["rationale"] = "   "
    parsed = parse_judge_response(json.dumps(data), "text")
    assert not parsed.ok and "rationale" in parsed.failure


def test_key_spelling_nesting_and_synonyms_are_normalized():
    data = {
        "scores": {
            "Alignment With Metadata": {"Score": 8, "reason": "a"},
            "natural-flow-from-current-narration": {"rating": 7, "explanation": "b"},
            "satisfaction_of_generation_conditions": {"score": 6, "justification": "c"},
            "semantic_consistency_with_ground_truth": {"score": 9, "rationale": "d"},
        },
        "overall": 8,
    }
    parsed = parse_judge_response(json.dumps(data), "text")
    assert parsed.ok and parsed.method == "normalized"
    assert parsed.rationales["natural_flow_from_current_narration"] == "b"


def test_python_literals_smart_quotes_and_trailing_commas():
    py = repr(answer())  # single quotes
    assert parse_judge_response(py, "text").ok
    curly = json.dumps(answer()).replace('"', "\u201c", 1)
    assert parse_judge_response(curly, "text").ok
    trailing = json.dumps(answer(), indent=1)[:-1] + ",\n}"
    assert parse_judge_response(trailing, "text").ok


@pytest.mark.parametrize("raw", [None, "", "   \n"])
def test_empty_responses(raw):
    parsed = parse_judge_response(raw, "omni")
    assert not parsed.ok and parsed.method == "empty" and parsed.failure == "empty response"


def test_plain_prose_is_unresolved_with_a_reason():
    parsed = parse_judge_response("I would give it an 8 overall.", "image")
    assert not parsed.ok and parsed.method == "unresolved"
    assert parsed.failure.startswith("not valid JSON")


def test_unknown_track_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown judge track 'video'"):
        parse_judge_response("{}", "video")
