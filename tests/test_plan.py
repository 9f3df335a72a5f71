"""Plan parsing: a table of concrete planner outputs, plus property tests (hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omnistory_core.contract import LABELS, Failure, Plan, SpeechTarget
from omnistory_core.plan_schema import (
    PLAN_FAILURE_CATEGORIES,
    REPAIRS,
    PlanParseResult,
    parse_plan,
    plan_to_json,
)

# Hypothesis deadlines are wall-clock assertions and the CPU is shared: no deadlines here
# (set per test, not as a global profile that would leak into other test files).
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

SPEECH = {
    "utterance": "Wait for me!",
    "speaker": "Mina",
    "emotion": "happy",
    "speed": "fast",
    "pitch": "high",
    "gender": "female",
}
VALID = {
    "narration": "Mina ran after the kite. \u201cWait for me!\u201d she called, laughing.",
    "image_prompt": "A girl in a red coat chasing a yellow kite over a windy hill, picture book",
    "speech": SPEECH,
}
EXPECTED = Plan(
    narration=VALID["narration"],
    image_prompt=VALID["image_prompt"],
    speech=SpeechTarget(**SPEECH),
)
GOOD = json.dumps(VALID, ensure_ascii=False)
OFFICIAL = {
    "text": VALID["narration"],
    "t2i": VALID["image_prompt"],
    "speech_metadata": {
        "speaker": {
            "name": "Mina",
            "line": "Wait for me!",
            "emotion": "happy",
            "speed": "fast",
            "pitch": "high",
            "gender": "female",
        }
    },
}


def with_speech(**changes: object) -> dict:
    """VALID with speech fields changed (a value of `...` deletes the field)."""
    speech = {k: v for k, v in {**SPEECH, **changes}.items() if v is not ...}
    return {**VALID, "speech": speech}


def with_top(**changes: object) -> dict:
    return {k: v for k, v in {**VALID, **changes}.items() if v is not ...}


def dumps(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)


SMART = (
    "{\u201cnarration\u201d: \u201cMina ran after the kite. \u201cWait for me!\u201d she called,"
    " laughing.\u201d, \u201cimage_prompt\u201d: \u201cA girl in a red coat chasing a yellow kite"
    " over a windy hill, picture book\u201d, \u201cspeech\u201d: {\u2018utterance\u2019:"
    " \u2018Wait for me!\u2019, \u201cspeaker\u201d: \u201cMina\u201d, \u201cemotion\u201d:"
    " \u201chappy\u201d, \u201cspeed\u201d: \u201cfast\u201d, \u201cpitch\u201d: \u201chigh\u201d,"
    " \u201cgender\u201d: \u201cfemale\u201d}}"
)

# (id, raw output, expected plan, expected repairs)
REPAIRED_CASES = [
    ("clean", GOOD, EXPECTED, []),
    ("surrounding_whitespace", "\n  " + GOOD + "\n\n", EXPECTED, []),
    ("fenced_json", "```json\n" + GOOD + "\n```", EXPECTED, ["strip_code_fence"]),
    (
        "fenced_with_prose",
        "Here is the plan you asked for:\n\n```JSON\n" + GOOD + "\n```\n\nEnjoy!",
        EXPECTED,
        ["strip_code_fence"],
    ),
    ("fenced_unclosed", "```\n" + GOOD + "\n", EXPECTED, ["strip_code_fence"]),
    (
        "prose_around",
        "Sure! Here's the plan: " + GOOD + " I hope it's what you wanted {really}.",
        EXPECTED,
        ["extract_json_object"],
    ),
    (
        "prose_with_braces_before",
        "The template is {narration, image_prompt}. Filled in:\n" + GOOD,
        EXPECTED,
        ["extract_json_object"],
    ),
    (
        "prose_and_braces_inside_strings",
        "Plan -> " + dumps(with_top(narration='She drew a "}" and a "{" in the sand.')) + " <- end",
        Plan(
            narration='She drew a "}" and a "{" in the sand.',
            image_prompt=VALID["image_prompt"],
            speech=EXPECTED.speech,
        ),
        ["extract_json_object"],
    ),
    (
        "trailing_commas",
        GOOD[:-2] + ",\n  },\n}",
        EXPECTED,
        ["remove_trailing_commas"],
    ),
    ("python_dict", repr(VALID), EXPECTED, ["python_literal"]),
    (
        "python_dict_apostrophe_and_trailing_comma",
        repr(with_speech(utterance="It's mine!"))[:-1] + ",}",
        Plan(
            EXPECTED.narration,
            EXPECTED.image_prompt,
            SpeechTarget(**{**SPEECH, "utterance": "It's mine!"}),
        ),
        ["python_literal"],
    ),
    ("smart_quotes", SMART, EXPECTED, ["normalize_smart_quotes"]),
    (
        "raw_newline_in_string",
        GOOD.replace("kite. ", "kite.\n"),
        Plan(
            EXPECTED.narration.replace("kite. ", "kite.\n"), EXPECTED.image_prompt, EXPECTED.speech
        ),
        ["allow_control_characters"],
    ),
    (
        "label_case_and_whitespace",
        dumps(with_speech(emotion="Happy ")),
        EXPECTED,
        ["strip_label_whitespace", "normalize_label_case"],
    ),
    ("label_upper_case", dumps(with_speech(gender="FEMALE")), EXPECTED, ["normalize_label_case"]),
    (
        "label_whitespace_only",
        dumps(with_speech(pitch="\thigh\n")),
        EXPECTED,
        ["strip_label_whitespace"],
    ),
    ("official_shape", dumps(OFFICIAL), EXPECTED, ["map_official_shape"]),
    (
        "official_shape_with_extras",
        dumps(
            {
                **OFFICIAL,
                "reasoning": "x",
                "speech_metadata": {
                    "speaker": {**OFFICIAL["speech_metadata"]["speaker"], "emotion": " HAPPY"},
                    "style": "storybook",
                },
            }
        ),
        EXPECTED,
        [
            "map_official_shape",
            "drop_unknown_fields",
            "strip_label_whitespace",
            "normalize_label_case",
        ],
    ),
    (
        "unknown_fields",
        dumps({**VALID, "notes": "n", "speech": {**SPEECH, "age": 7}}),
        EXPECTED,
        ["drop_unknown_fields"],
    ),
    (
        "everything_at_once",
        "Okay.\n```json\n"
        + SMART.replace("\u201chappy\u201d", "\u201c Happy\u201d").replace("}}", ",},}")
        + "\n```",
        EXPECTED,
        [
            "strip_code_fence",
            "normalize_smart_quotes",
            "remove_trailing_commas",
            "strip_label_whitespace",
            "normalize_label_case",
        ],
    ),
]

# (id, raw output, category, substrings the message must contain, expected repairs)
FAILED_CASES = [
    (
        "missing_utterance",
        dumps(with_speech(utterance=...)),
        "plan_missing_field",
        ["speech.utterance", "missing"],
        [],
    ),
    (
        "official_missing_line",
        dumps({**OFFICIAL, "speech_metadata": {"speaker": {"name": "Mina", "emotion": "sad"}}}),
        "plan_missing_field",
        ["speech_metadata.speaker.line", "speech.utterance", "speech_metadata.speaker.gender"],
        ["map_official_shape"],
    ),
    (
        "official_missing_speaker",
        dumps({"text": "t", "t2i": "p"}),
        "plan_missing_field",
        ["speech_metadata.speaker"],
        ["map_official_shape"],
    ),
    (
        "empty_utterance",
        dumps(with_speech(utterance="")),
        "plan_missing_field",
        ["speech.utterance", "empty"],
        [],
    ),
    (
        "blank_speaker",
        dumps(with_speech(speaker=" \n")),
        "plan_missing_field",
        ["speech.speaker", "whitespace"],
        [],
    ),
    (
        "null_narration",
        dumps(with_top(narration=None)),
        "plan_missing_field",
        ["narration", "null"],
        [],
    ),
    (
        "missing_prompt",
        dumps(with_top(image_prompt=...)),
        "plan_missing_field",
        ["image_prompt", "missing"],
        [],
    ),
    (
        "number_as_narration",
        dumps(with_top(narration=42)),
        "plan_missing_field",
        ["narration", "expected a string", "number 42"],
        [],
    ),
    (
        "list_as_utterance",
        dumps(with_speech(utterance=["Wait", "for me"])),
        "plan_missing_field",
        ["speech.utterance", "expected a string", "array"],
        [],
    ),
    (
        "speech_not_object",
        dumps(with_top(speech="Mina: wait!")),
        "plan_missing_field",
        ["speech", "object"],
        [],
    ),
    ("empty_object", "{}", "plan_missing_field", ["narration", "image_prompt", "speech"], []),
    (
        "empty_label",
        dumps(with_speech(speed="")),
        "plan_missing_field",
        ["speech.speed", "empty"],
        [],
    ),
    (
        "furious",
        dumps(with_speech(emotion="furious")),
        "plan_invalid_label",
        ["speech.emotion", "'furious'", "angry, happy, neutral, sad"],
        [],
    ),
    (
        "furious_official",
        dumps(
            {
                **OFFICIAL,
                "speech_metadata": {
                    "speaker": {**OFFICIAL["speech_metadata"]["speaker"], "emotion": "Furious"}
                },
            }
        ),
        "plan_invalid_label",
        ["speech_metadata.speaker.emotion", "'Furious'"],
        ["map_official_shape"],
    ),
    (
        "label_not_string",
        dumps(with_speech(pitch=3)),
        "plan_invalid_label",
        ["speech.pitch", "low, normal, high", "number 3"],
        [],
    ),
    (
        "gender_other",
        dumps(with_speech(gender="nonbinary")),
        "plan_invalid_label",
        ["speech.gender", "female, male"],
        [],
    ),
    (
        "empty_prompt",
        dumps(with_top(image_prompt="")),
        "unusable_image_prompt",
        ["image_prompt", "empty"],
        [],
    ),
    (
        "whitespace_prompt",
        dumps(with_top(image_prompt=" \n\t ")),
        "unusable_image_prompt",
        ["image_prompt", "whitespace"],
        [],
    ),
    (
        "garbage",
        "I'm sorry, I can't continue this story.",
        "plan_json_error",
        ["no JSON object"],
        [],
    ),
    ("empty_text", "", "plan_json_error", ["empty"], []),
    ("whitespace_text", " \n\t", "plan_json_error", ["whitespace"], []),
    ("array", "[" + GOOD + "]", "plan_json_error", ["expected a JSON object", "array"], []),
    ("json_string", json.dumps(GOOD), "plan_json_error", ["expected a JSON object", "string"], []),
    ("number", "3.5", "plan_json_error", ["number"], []),
    ("truncated", GOOD[:-25], "plan_json_error", ["never closed"], []),
    (
        "fenced_array",
        "```json\n[1, 2]\n```",
        "plan_json_error",
        ["inside the code fence", "array"],
        [],
    ),
    ("broken_braces", "{narration: the end}", "plan_json_error", ["parses"], []),
    ("python_set", "{'narration', 'image_prompt'}", "plan_json_error", ["set"], []),
    ("bare_identifiers", "{'narration': story_text}", "plan_json_error", ["invalid JSON"], []),
]


@pytest.mark.parametrize(
    "raw, expected, repairs", [c[1:] for c in REPAIRED_CASES], ids=[c[0] for c in REPAIRED_CASES]
)
def test_repaired_outputs(raw: str, expected: Plan, repairs: list[str]) -> None:
    result = parse_plan(raw)
    assert result.failure is None, result.failure
    assert result.plan == expected
    assert result.repairs == repairs
    assert result.ok


@pytest.mark.parametrize(
    "raw, category, needles, repairs",
    [c[1:] for c in FAILED_CASES],
    ids=[c[0] for c in FAILED_CASES],
)
def test_failed_outputs(raw: str, category: str, needles: list[str], repairs: list[str]) -> None:
    result = parse_plan(raw)
    assert result.plan is None
    assert isinstance(result.failure, Failure)
    assert result.failure.category == category, result.failure
    for needle in needles:
        assert needle in result.failure.message, (needle, result.failure.message)
    assert result.repairs == repairs
    assert not result.ok


def test_smart_quotes_inside_strings_are_content() -> None:
    # a valid JSON plan whose narration quotes dialogue with curly quotes: nothing to repair
    raw = dumps(with_top(narration="\u201cHi,\u201d she said. \u2018Really?\u2019"))
    result = parse_plan(raw)
    assert result.repairs == []
    assert result.plan is not None
    assert result.plan.narration == "\u201cHi,\u201d she said. \u2018Really?\u2019"


def test_plan_mentioning_a_code_fence_is_not_cut() -> None:
    narration = "He wrote ```\n{not json}\n``` on the wall."
    result = parse_plan(dumps(with_top(narration=narration)))
    assert result.repairs == []
    assert result.plan is not None and result.plan.narration == narration


def test_text_fields_are_kept_verbatim() -> None:
    result = parse_plan(
        dumps(with_top(narration="  padded  ", speech={**SPEECH, "speaker": " Mina"}))
    )
    assert result.plan is not None
    assert result.plan.narration == "  padded  "
    assert result.plan.speech.speaker == " Mina"
    assert result.repairs == []


def test_prefers_the_object_with_plan_keys() -> None:
    raw = 'Example of an unrelated object: {"a": 1}. The plan: ' + GOOD
    result = parse_plan(raw)
    assert result.plan == EXPECTED
    assert result.repairs == ["extract_json_object"]


def test_precedence_missing_then_label_then_prompt() -> None:
    obj = {**with_speech(utterance=..., emotion="furious"), "image_prompt": " "}
    result = parse_plan(dumps(obj))
    assert result.failure is not None
    assert result.failure.category == "plan_missing_field"
    message = result.failure.message
    # every problem is listed, most basic first
    assert message.index("speech.utterance") < message.index("speech.emotion")
    assert message.index("speech.emotion") < message.index("image_prompt")

    result = parse_plan(dumps({**with_speech(emotion="furious"), "image_prompt": ""}))
    assert result.failure is not None
    assert result.failure.category == "plan_invalid_label"
    assert "image_prompt" in result.failure.message


def test_repairs_are_reported_on_failure_too() -> None:
    result = parse_plan("```json\n" + dumps(with_speech(emotion="furious")) + "\n```")
    assert result.failure is not None and result.failure.category == "plan_invalid_label"
    assert result.repairs == ["strip_code_fence"]


@pytest.mark.parametrize("value", [None, b'{"narration": "x"}', 42, VALID, ["a"]])
def test_non_str_input_is_a_json_error(value: object) -> None:
    result = parse_plan(value)  # type: ignore[arg-type]
    assert result.plan is None and result.failure is not None
    assert result.failure.category == "plan_json_error"
    assert type(value).__name__ in result.failure.message


def test_deeply_nested_input_is_a_json_error() -> None:
    for raw in ("[" * 100_000, "{" * 50_000 + "}" * 50_000, '{"a":' * 30_000 + "1" + "}" * 30_000):
        result = parse_plan(raw)
        assert result.failure is not None
        assert result.failure.category == "plan_json_error"


def test_to_dict_is_json_able() -> None:
    ok = parse_plan("```json\n" + GOOD + "\n```").to_dict()
    assert json.loads(json.dumps(ok)) == {
        "plan": VALID,
        "failure": None,
        "repairs": ["strip_code_fence"],
    }
    bad = parse_plan("nope").to_dict()
    assert bad["plan"] is None and bad["failure"]["category"] == "plan_json_error"


def test_plan_to_json_is_canonical() -> None:
    text = plan_to_json(EXPECTED)
    assert text == json.dumps(VALID, ensure_ascii=False, separators=(",", ":"))
    assert list(json.loads(text)) == ["narration", "image_prompt", "speech"]
    assert list(json.loads(text)["speech"]) == list(SPEECH)


@pytest.mark.parametrize(
    "plan, needle",
    [
        (Plan("", "p", EXPECTED.speech), "narration"),
        (Plan("n", " ", EXPECTED.speech), "image_prompt"),
        (Plan("n", "p", SpeechTarget(**{**SPEECH, "emotion": "furious"})), "speech.emotion"),
        (Plan("n", "p", SpeechTarget(**{**SPEECH, "gender": "Female"})), "not canonical"),
    ],
)
def test_plan_to_json_rejects_plans_that_would_not_round_trip(plan: Plan, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        plan_to_json(plan)


# -- property tests -----------------------------------------------------------------------------

non_blank = st.text(min_size=1, max_size=40).filter(lambda s: s.strip() != "")
plans = st.builds(
    Plan,
    narration=non_blank,
    image_prompt=non_blank,
    speech=st.builds(
        SpeechTarget,
        utterance=non_blank,
        speaker=non_blank,
        **{k: st.sampled_from(v) for k, v in LABELS.items()},
    ),
)
any_text = st.text(st.characters(exclude_categories=()), max_size=300)  # surrogates included
JSONISH_TOKENS = list("{}[]\":,'`\\ \n\t") + [
    "\u201c",
    "\u201d",
    "\u2018",
    "\u2019",
    "narration",
    "image_prompt",
    "speech",
    "true",
    "null",
    "1",
    "a",
    "```json\n",
]
# short texts built from JSON-ish tokens reach the scanner and repair paths far more often
jsonish_text = st.lists(st.sampled_from(JSONISH_TOKENS), max_size=60).map("".join)


def assert_well_formed(result: PlanParseResult) -> None:
    assert isinstance(result, PlanParseResult)
    assert (result.plan is None) != (result.failure is None)
    assert isinstance(result.repairs, list)
    assert result.repairs == [r for r in REPAIRS if r in result.repairs]  # known, ordered, unique
    if result.failure is not None:
        assert result.failure.category in PLAN_FAILURE_CATEGORIES
        assert isinstance(result.failure.message, str) and result.failure.message
    else:
        plan = result.plan
        assert plan is not None
        for text in (plan.narration, plan.image_prompt, plan.speech.utterance, plan.speech.speaker):
            assert isinstance(text, str) and text.strip()
        for label, allowed in LABELS.items():
            assert getattr(plan.speech, label) in allowed
        assert parse_plan(plan_to_json(plan)).plan == plan


@settings(RELAXED, max_examples=300)
@given(st.one_of(any_text, jsonish_text))
def test_never_raises_on_arbitrary_text(raw: str) -> None:
    assert_well_formed(parse_plan(raw))


MUTATIONS = ("delete", "insert", "replace", "truncate", "duplicate", "swap_quotes")


@settings(RELAXED, max_examples=300)
@given(plans, st.data())
def test_never_raises_on_mutated_plans(plan: Plan, data: st.DataObject) -> None:
    raw = data.draw(
        st.sampled_from(
            [plan_to_json(plan), repr(plan.to_dict()), json.dumps(plan.to_dict(), indent=2)]
        )
    )
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(MUTATIONS))
        i = data.draw(st.integers(0, len(raw)))
        j = data.draw(st.integers(i, len(raw)))
        if op == "delete":
            raw = raw[:i] + raw[j:]
        elif op == "insert":
            raw = (
                raw[:i]
                + data.draw(st.one_of(jsonish_text, any_text.filter(lambda s: len(s) < 20)))
                + raw[i:]
            )
        elif op == "replace" and i < len(raw):
            raw = raw[:i] + data.draw(st.sampled_from(list("{}\",:'\u201c\u201d x"))) + raw[i + 1 :]
        elif op == "truncate":
            raw = raw[:i]
        elif op == "duplicate":
            raw = raw[:j] + raw[i:j] + raw[j:]
        elif op == "swap_quotes":
            raw = raw.replace('"', data.draw(st.sampled_from(["'", "\u201c", "\u201d"])), 1 + i % 5)
    assert_well_formed(parse_plan(raw))


@RELAXED
@given(plans)
def test_canonical_json_round_trips_without_repairs(plan: Plan) -> None:
    result = parse_plan(plan_to_json(plan))
    assert result.failure is None
    assert result.plan == plan
    assert result.repairs == []


prose = st.text(
    st.characters(categories=["L", "Zs"], include_characters=".,!?:;-"), min_size=1, max_size=30
).filter(lambda s: any(c.isalpha() for c in s))
plain = st.text(
    st.characters(
        exclude_categories=["Cc", "Cs"],
        exclude_characters='"\\\u201c\u201d\u2018\u2019\u201a\u201b\u201e\u201f',
    ),
    min_size=1,
    max_size=30,
).filter(lambda s: s.strip() != "")
plain_plans = st.builds(
    Plan,
    narration=plain,
    image_prompt=plain,
    speech=st.builds(
        SpeechTarget,
        utterance=plain,
        speaker=plain,
        **{k: st.sampled_from(v) for k, v in LABELS.items()},
    ),
)


def _official(plan: Plan) -> dict:
    s = plan.speech
    speaker = {
        "name": s.speaker,
        "line": s.utterance,
        "emotion": s.emotion,
        "speed": s.speed,
        "pitch": s.pitch,
        "gender": s.gender,
    }
    return {
        "text": plan.narration,
        "t2i": plan.image_prompt,
        "speech_metadata": {"speaker": speaker},
    }


def _smart(plan: Plan) -> str:
    def q(s: str) -> str:
        return "\u201c" + s + "\u201d"

    def obj(pairs: list[tuple[str, str]]) -> str:
        return "{" + ", ".join(f"{q(k)}: {v}" for k, v in pairs) + "}"

    speech = obj([(k, q(v)) for k, v in plan.speech.to_dict().items()])
    top = [("narration", q(plan.narration)), ("image_prompt", q(plan.image_prompt))]
    return obj(top + [("speech", speech)])


@RELAXED
@given(plain_plans, prose, prose)
def test_repairs_recover_the_same_plan(plan: Plan, before: str, after: str) -> None:
    canonical = plan_to_json(plan)
    variants = {
        "```json\n" + canonical + "\n```": ["strip_code_fence"],
        before + " " + canonical + " " + after: ["extract_json_object"],
        canonical[:-2] + ",}}": ["remove_trailing_commas"],
        repr(plan.to_dict()): ["python_literal"],
        _smart(plan): ["normalize_smart_quotes"],
        json.dumps(_official(plan)): ["map_official_shape"],
    }
    for raw, repairs in variants.items():
        result = parse_plan(raw)
        assert result.failure is None, (raw, result.failure)
        assert result.plan == plan, raw
        assert result.repairs == repairs, raw


label_variant = st.sampled_from(["", " ", "\t", "\n "])


@RELAXED
@given(plans, st.data())
def test_label_spelling_variants(plan: Plan, data: st.DataObject) -> None:
    obj = plan.to_dict()
    expected: set[str] = set()
    for label in LABELS:
        value = obj["speech"][label]
        case = data.draw(st.sampled_from([str.lower, str.upper, str.title]))
        pad_left, pad_right = data.draw(label_variant), data.draw(label_variant)
        spelled = pad_left + case(value) + pad_right
        obj["speech"][label] = spelled
        if spelled.strip() != spelled:
            expected.add("strip_label_whitespace")
        if spelled.strip() != value:
            expected.add("normalize_label_case")
    result = parse_plan(json.dumps(obj))
    assert result.plan == plan
    assert result.repairs == [r for r in REPAIRS if r in expected]


def test_many_brace_groups_in_prose_before_the_plan() -> None:
    raw = "Slots: " + "{slot} " * 100 + "\nPlan: " + GOOD
    result = parse_plan(raw)
    assert result.plan == EXPECTED
    assert result.repairs == ["extract_json_object"]


def test_truncated_plan_is_not_replaced_by_its_inner_object() -> None:
    # the speech object is complete but the plan around it is cut off
    raw = "Plan: " + GOOD[:-1]
    result = parse_plan(raw)
    assert result.failure is not None
    assert result.failure.category == "plan_json_error"
    assert "never closed" in result.failure.message
