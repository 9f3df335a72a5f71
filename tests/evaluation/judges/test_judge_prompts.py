"""Rendered judge messages against the prompt text typed from the paper (App. E.4)."""

from __future__ import annotations

import pytest
from judge_test_helpers import expected_text, joined
from omnistory_eval.judges import (
    CRITERIA,
    JUDGE_SPECS,
    JudgeInputError,
    render_messages,
    render_prompt,
)
from omnistory_eval.judges.prompts import (
    prompt_conditions,
    prompt_metadata,
    prompt_speech_metadata,
    repair_messages,
    serialize_value,
)
from omnistory_eval.judges.rubric import judge_json_schema, repair_json_schema

TEXT_JUDGES = ("text-qwen3-30b-a3b", "text-seed-oss-36b", "text-llama-nemotron-49b")


def test_text_messages_match_paper(item):
    for judge in ("text-qwen3-30b-a3b", "text-seed-oss-36b"):
        system, user = render_messages(judge, item)
        assert system == {"role": "system", "content": expected_text("text_system.txt")}
        assert user == {"role": "user", "content": expected_text("text_user.txt")}


def test_nemotron_prepends_no_think_and_a_newline(item):
    system, user = render_messages("text-llama-nemotron-49b", item)
    assert system["content"] == "/no_think\n" + expected_text("text_system.txt")
    assert user["content"] == expected_text("text_user.txt")


def test_text_judges_reasoning_controls(item):
    kwargs = {j: render_prompt(j, item).chat_template_kwargs for j in TEXT_JUDGES}
    assert kwargs == {
        "text-qwen3-30b-a3b": {},
        "text-seed-oss-36b": {"thinking_budget": 0},
        "text-llama-nemotron-49b": {},
    }


@pytest.mark.parametrize(
    "judge", ["image-qwen3-vl-32b", "image-exaone45-33b", "image-internvl35-38b"]
)
def test_image_messages_match_paper(item_and_names, judge):
    item, names = item_and_names
    rendered = render_prompt(judge, item)
    system, user = rendered.messages
    assert joined(system["content"], names) == expected_text("image_system.txt")
    assert joined(user["content"], names) == expected_text("image_user.txt")
    assert [(m.kind, names[m.path]) for m in rendered.media] == [
        ("image", "current.png"),
        ("image", "reference.png"),
        ("image", "candidate.png"),
    ]


def test_image_reasoning_controls_and_internvl_placeholders(item):
    assert render_prompt("image-exaone45-33b", item).chat_template_kwargs == {
        "enable_thinking": False
    }
    assert render_prompt("image-qwen3-vl-32b", item).template_messages is None
    flat = render_prompt("image-internvl35-38b", item).template_messages
    image_user = expected_text("image_user.txt")
    for name in ("current.png", "reference.png", "candidate.png"):
        image_user = image_user.replace(f"[[image:{name}]]", "<image>")
    assert flat == [
        {"role": "system", "content": expected_text("image_system.txt")},
        {"role": "user", "content": image_user},
    ]
    assert flat[1]["content"].count("<image>") == 3


@pytest.mark.parametrize(
    "judge", ["speech-audio-flamingo-next", "speech-moss-audio-8b", "speech-kimi-audio-7b"]
)
def test_speech_message_matches_paper(item_and_names, judge):
    item, names = item_and_names
    (user,) = render_messages(judge, item)
    assert user["role"] == "user"
    assert joined(user["content"], names) == expected_text("speech_user.txt")


def test_moss_and_kimi_serialized_prompts(item):
    moss = render_prompt("speech-moss-audio-8b", item)
    kimi = render_prompt("speech-kimi-audio-7b", item)
    assert moss.prompt == expected_text("moss_audio_prompt.txt")
    assert kimi.prompt == expected_text("kimi_audio_prompt.txt")
    assert kimi.stop_token_ids == (151644,)
    assert render_prompt("speech-audio-flamingo-next", item).prompt is None


@pytest.mark.parametrize("judge", ["omni-qwen3-omni-30b", "omni-nemotron3-nano-omni"])
def test_omni_messages_match_paper(item_and_names, judge):
    item, names = item_and_names
    rendered = render_prompt(judge, item)
    system, user = rendered.messages
    assert joined(system["content"], names) == expected_text("omni_system.txt")
    assert joined(user["content"], names) == expected_text("omni_user.txt")
    assert [m.kind for m in rendered.media] == ["image", "image", "image", "audio"]
    assert rendered.json_schema is None


def test_gemma4_arrangement_and_constrained_decoding(item_and_names):
    item, names = item_and_names
    rendered = render_prompt("omni-gemma4-12b", item)
    system, user = rendered.messages
    assert joined(system["content"], names) == expected_text("omni_system.txt")
    assert joined(user["content"], names) == expected_text("gemma4_user.txt")
    assert rendered.chat_template_kwargs == {"enable_thinking": False}
    assert rendered.json_schema == judge_json_schema("omni")
    assert rendered.json_schema["required"] == list(CRITERIA["omni"])


def test_nemotron_omni_disables_thinking(item):
    assert render_prompt("omni-nemotron3-nano-omni", item).chat_template_kwargs == {
        "enable_thinking": False
    }
    assert render_prompt("omni-qwen3-omni-30b", item).chat_template_kwargs == {}


def test_repair_prompt_matches_paper(item):
    system, user = repair_messages(
        track="speech",
        raw_response=item["repair_raw_response"],
        parse_error=item["repair_parse_error"],
    )
    assert system == {"role": "system", "content": expected_text("repair_system.txt")}
    assert user == {"role": "user", "content": expected_text("repair_user_speech.txt")}


def test_repair_schema_allows_the_track_schema_or_unrecoverable():
    schema = repair_json_schema("image")
    judge_schema, unrecoverable = schema["anyOf"]
    assert judge_schema == judge_json_schema("image")
    assert judge_schema["required"] == list(CRITERIA["image"])
    assert judge_schema["additionalProperties"] is False
    assert unrecoverable["properties"] == {"unrecoverable": {"const": True}}
    assert unrecoverable["additionalProperties"] is False


# -- placeholder filling rules --------------------------------------------------------------


def test_metadata_and_conditions_are_unwrapped_and_reordered():
    meta = {"metadata": {"characters": [], "genre": "Fable", "extra": 1, "topic": "t"}}
    assert list(prompt_metadata(meta)) == ["genre", "topic", "characters", "extra"]
    cond = {"condition_json": {"ambient_sound": "a", "text_instruction": "go", "scene": "s"}}
    assert prompt_conditions(cond) == {"scene": "s", "text content": "go", "ambient_sound": "a"}
    assert list(prompt_conditions(cond)) == ["scene", "text content", "ambient_sound"]


def test_speech_metadata_forms_agree():
    flat = {
        "utterance": "Hi!",
        "speaker": "Zoë",
        "emotion": "sad",
        "speed": "slow",
        "pitch": "low",
        "gender": "female",
    }
    nested = {
        "parsed": {
            "speaker": {
                "gender": "female",
                "name": "Zoë",
                "line": "Hi!",
                "emotion": "sad",
                "speed": "slow",
                "pitch": "low",
            }
        }
    }
    expected = {
        "speaker": {
            "name": "Zoë",
            "line": "Hi!",
            "emotion": "sad",
            "speed": "slow",
            "pitch": "low",
            "gender": "female",
        }
    }
    assert prompt_speech_metadata(flat) == expected
    assert prompt_speech_metadata(nested) == expected
    assert list(prompt_speech_metadata(nested)["speaker"]) == list(expected["speaker"])


def test_strings_are_inserted_verbatim_and_other_values_as_indented_json():
    assert serialize_value("already {text}") == "already {text}"
    assert serialize_value({"a": ["é"]}) == '{\n  "a": [\n    "é"\n  ]\n}'
    assert serialize_value(3) == "3"


def test_string_metadata_is_not_reserialized(item):
    item = dict(item, metadata="Genre: fable", conditions="be brief")
    user = render_messages("text-qwen3-30b-a3b", item)[1]["content"]
    assert "    <metadata>\n    Genre: fable\n    </metadata>" in user
    assert "    <generation_conditions>\n    be brief\n    </generation_conditions>" in user


def test_every_judge_renders_its_track_schema_keys(item):
    for judge, spec in JUDGE_SPECS.items():
        rendered = render_prompt(judge, item)
        system_text = joined(
            rendered.messages[0]["content"], {p: p for p in item.values() if isinstance(p, str)}
        )
        for key in CRITERIA[spec.track]:
            assert f'"{key}": {{"score": <integer 1-10>' in (rendered.prompt or system_text), (
                judge,
                key,
            )


def test_missing_or_wrong_inputs_name_the_judge_example_and_field(item):
    broken = {k: v for k, v in item.items() if k != "reference_text"}
    with pytest.raises(
        JudgeInputError, match=r"text-qwen3-30b-a3b.*fox-and-grapes.*reference_text"
    ):
        render_prompt("text-qwen3-30b-a3b", broken)
    with pytest.raises(JudgeInputError, match=r"candidate_image.*Media or a path"):
        render_prompt("image-qwen3-vl-32b", dict(item, candidate_image=123))
    with pytest.raises(KeyError, match="unknown judge"):
        render_prompt("no-such-judge", item)


def test_media_objects_are_accepted(item):
    from omnistory_core.components import Media

    as_media = dict(item, candidate_image=Media(path=item["candidate_image"], sha256="x"))
    assert render_prompt("image-qwen3-vl-32b", as_media) == render_prompt(
        "image-qwen3-vl-32b", item
    )
