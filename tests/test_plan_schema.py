"""The shipped Plan JSON Schema: valid draft 2020-12, structured-output friendly, and in exact
agreement with what `parse_plan` accepts without repairs."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from omnistory_core.contract import LABELS, Plan, SpeechTarget
from omnistory_core.plan_schema import (
    PLAN_SCHEMA_VERSION,
    parse_plan,
    plan_json_schema,
    plan_response_format,
)

# Hypothesis deadlines are wall-clock assertions and the CPU is shared: no deadlines here
# (set per test, not as a global profile that would leak into other test files).
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
SCHEMA = plan_json_schema()
VALIDATOR = Draft202012Validator(SCHEMA)

# Keywords OpenAI strict structured outputs and vLLM's grammar backends both accept.
STRUCTURED_OUTPUT_KEYWORDS = {
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "pattern",
}


def test_schema_file_is_valid_draft_2020_12() -> None:
    assert SCHEMA["$schema"] == DRAFT_2020_12
    Draft202012Validator.check_schema(SCHEMA)
    assert validator_for(SCHEMA) is Draft202012Validator


def test_schema_is_versioned_package_data() -> None:
    name = f"plan.v{PLAN_SCHEMA_VERSION}.schema.json"
    resource = resources.files("omnistory_core.schemas").joinpath(name)
    assert resource.is_file()
    assert json.loads(resource.read_text(encoding="utf-8")) == SCHEMA
    assert f"v{PLAN_SCHEMA_VERSION}" in SCHEMA["$id"]
    assert PLAN_SCHEMA_VERSION == "1"


ZIP_CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
from omnistory_core.plan_schema import parse_plan, plan_json_schema
import omnistory_core.plan_schema as plan_module
stdlib = set(sys.stdlib_module_names) | {"__main__"}
outside = sorted({m.split(".")[0] for m in sys.modules} - stdlib)
result = parse_plan('```json\\n{"text": "n", "t2i": "p", "speech_metadata": {"speaker": {'
                    '"name": "A", "line": "Hi", "emotion": "sad", "speed": "slow", "pitch": "low", '
                    '"gender": "male"}}}\\n```')
print(json.dumps({"file": plan_module.__file__, "id": plan_json_schema()["$id"],
                  "outside": outside, "result": result.to_dict()}))
"""


def test_schema_loads_from_a_zipped_install_with_stdlib_only(tmp_path: Path) -> None:
    # a wheel is a zip: importlib.resources must find the schema there, and importing the
    # parser must need nothing beyond the standard library (-S: no site-packages at all)
    package = Path(__file__).resolve().parents[1] / "omnistory_core"
    archive = tmp_path / "omnistory_core.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(package.rglob("*")):
            if path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
                zf.write(path, path.relative_to(package.parent).as_posix())
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", ZIP_CHECK, str(archive)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(out.stdout)
    assert report["file"].startswith(str(archive))
    assert report["id"] == SCHEMA["$id"]
    assert report["outside"] == ["omnistory_core"]
    assert report["result"]["failure"] is None
    assert report["result"]["repairs"] == ["strip_code_fence", "map_official_shape"]
    assert report["result"]["plan"]["speech"]["utterance"] == "Hi"


def test_loader_returns_a_fresh_copy() -> None:
    schema = plan_json_schema()
    schema["properties"]["speech"]["properties"]["emotion"]["enum"].append("furious")
    assert (
        "furious" not in plan_json_schema()["properties"]["speech"]["properties"]["emotion"]["enum"]
    )


def test_schema_matches_the_contract() -> None:
    props = SCHEMA["properties"]
    assert list(props) == [f.name for f in dataclasses.fields(Plan)]
    speech = props["speech"]["properties"]
    assert list(speech) == [f.name for f in dataclasses.fields(SpeechTarget)]
    for label, allowed in LABELS.items():
        assert speech[label] == {"type": "string", "enum": list(allowed)}


def _walk(node: Any, path: str = "#"):
    yield path, node
    for key, child in node.get("properties", {}).items():
        yield from _walk(child, f"{path}/properties/{key}")


def test_schema_stays_in_the_structured_output_subset() -> None:
    for path, node in _walk(SCHEMA):
        assert set(node) <= STRUCTURED_OUTPUT_KEYWORDS, (
            path,
            set(node) - STRUCTURED_OUTPUT_KEYWORDS,
        )
        assert node["type"] in ("object", "string"), path
        if node["type"] == "object":
            assert node["additionalProperties"] is False, path
            assert node["required"] == list(node["properties"]), path
        else:
            assert ("enum" in node) != ("pattern" in node), path


NON_BLANK = SCHEMA["properties"]["narration"]["pattern"]


@pytest.mark.parametrize(
    "value, ok",
    [
        ("a", True),
        ("  a  ", True),
        ("\n\tx\n", True),
        ("", False),
        (" ", False),
        ("\n\t \u3000", False),
    ],
)
def test_non_blank_pattern_means_the_same_searched_or_anchored(value: str, ok: bool) -> None:
    # jsonschema searches; grammar-based decoders (xgrammar, llguidance) anchor the pattern
    assert (re.search(NON_BLANK, value) is not None) is ok
    assert (re.fullmatch(NON_BLANK, value) is not None) is ok


def test_non_blank_pattern_excludes_exactly_str_isspace() -> None:
    # the parser calls a text blank when str.strip() empties it; the pattern must agree on every
    # code point, and it spells the set out because \s differs between regex engines
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        assert (re.fullmatch(NON_BLANK, char) is None) is char.isspace(), hex(code)


def test_response_format_for_openai_and_vllm() -> None:
    fmt = plan_response_format()
    assert fmt["type"] == "json_schema"
    inner = fmt["json_schema"]
    assert inner["strict"] is True
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", inner["name"])
    assert "$schema" not in inner["schema"] and "$id" not in inner["schema"]
    assert {k: v for k, v in SCHEMA.items() if not k.startswith("$")} == inner["schema"]


# -- the schema accepts exactly what the parser accepts without repairs --------------------------

non_blank = st.text(min_size=1, max_size=20).filter(lambda s: s.strip() != "")
plan_dicts = st.builds(
    lambda *a: Plan(a[0], a[1], SpeechTarget(*a[2:])).to_dict(),
    non_blank,
    non_blank,
    non_blank,
    non_blank,
    *[st.sampled_from(v) for v in LABELS.values()],
)
ALL_LABELS = sorted({v for values in LABELS.values() for v in values})
label_like = st.builds(
    lambda v, case, pad: pad + case(v) + pad,
    st.sampled_from(ALL_LABELS + ["furious", "joyful", "medium", "other", ""]),
    st.sampled_from([str.lower, str.upper, str.title]),
    st.sampled_from(["", " ", "\n"]),
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
    st.sampled_from(["", " ", "\t\n", "\u3000"]),
    label_like,
    st.lists(st.text(max_size=5), max_size=2),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)
TOP_KEYS = ["narration", "image_prompt", "speech", "text", "t2i", "speech_metadata", "extra"]
SPEECH_KEYS = [f.name for f in dataclasses.fields(SpeechTarget)] + ["line", "name", "age"]


@st.composite
def plan_like_objects(draw: st.DrawFn) -> dict[str, Any]:
    """Valid plan dicts with 0-3 edits: drop a key, set a key to any JSON value, add a key."""
    obj = draw(plan_dicts)
    for _ in range(draw(st.integers(0, 3))):
        speech = obj.get("speech")
        in_speech = isinstance(speech, dict) and draw(st.booleans())
        target = speech if in_speech else obj
        op = draw(st.sampled_from(["drop", "set", "set"]))
        if op == "drop" and target:
            del target[draw(st.sampled_from(sorted(target)))]
        elif op == "set":
            target[draw(st.sampled_from(SPEECH_KEYS if in_speech else TOP_KEYS))] = draw(values)
    return obj


def _parser_accepts_without_repairs(obj: dict[str, Any]) -> bool:
    result = parse_plan(json.dumps(obj, ensure_ascii=False))
    if result.plan is not None and not result.repairs:
        assert result.plan.to_dict() == obj
        return True
    return False


@settings(RELAXED, max_examples=400)
@given(plan_like_objects())
def test_schema_agrees_with_parser_on_generated_objects(obj: dict[str, Any]) -> None:
    assert VALIDATOR.is_valid(obj) == _parser_accepts_without_repairs(obj), obj


@RELAXED
@given(plan_dicts)
def test_schema_accepts_every_generated_valid_plan(obj: dict[str, Any]) -> None:
    assert VALIDATOR.is_valid(obj)
    assert _parser_accepts_without_repairs(obj)


def _speech(**changes: Any) -> dict[str, Any]:
    base = {
        "utterance": "Hi!",
        "speaker": "Mina",
        "emotion": "happy",
        "speed": "normal",
        "pitch": "high",
        "gender": "female",
    }
    return {k: v for k, v in {**base, **changes}.items() if v is not ...}


def _plan(**changes: Any) -> dict[str, Any]:
    base = {"narration": "n", "image_prompt": "p", "speech": _speech()}
    return {k: v for k, v in {**base, **changes}.items() if v is not ...}


@pytest.mark.parametrize(
    "obj, valid",
    [
        (_plan(), True),
        (_plan(narration=" padded "), True),
        (_plan(speech=_speech(emotion="Happy")), False),  # repaired by the parser
        (_plan(speech=_speech(emotion="happy ", gender="male")), False),
        (_plan(extra=1), False),
        (_plan(speech=_speech(age=7)), False),
        (_plan(speech=_speech(utterance=...)), False),
        (_plan(speech=_speech(emotion="furious")), False),
        (_plan(image_prompt=" "), False),
        (_plan(narration=""), False),
        (_plan(narration=3), False),
        (_plan(speech=[]), False),
        (
            {
                "text": "n",
                "t2i": "p",
                "speech_metadata": {"speaker": {"name": "Mina", "line": "Hi!"}},
            },
            False,
        ),
    ],
)
def test_schema_and_parser_on_known_objects(obj: dict[str, Any], valid: bool) -> None:
    assert VALIDATOR.is_valid(obj) is valid
    assert _parser_accepts_without_repairs(obj) is valid


# -- a real grammar-constrained decoder (llguidance, vLLM's "guidance" backend) -------------------


class _ByteTokenizer:
    """One token per byte plus EOS: enough for llguidance to check whole texts."""

    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([b]) for b in range(256)] + [b"<eos>"]
    special_token_ids = [256]

    def __call__(self, text: str | bytes) -> list[int]:
        return list(text.encode("utf-8") if isinstance(text, str) else text)


@pytest.fixture(scope="module")
def guidance() -> Any:
    llguidance = pytest.importorskip("llguidance")
    tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokenizer()), slices=[])
    schema = plan_response_format()["json_schema"]["schema"]
    grammar = llguidance.LLMatcher.grammar_from_json_schema(schema)

    def accepts(text: str) -> bool:
        # a fresh matcher per text: reset() does not clear an earlier error state
        matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        matcher.consume_tokens(tokenizer.tokenize_str(text))
        return not matcher.is_error() and matcher.is_accepting()

    accepts.llguidance = llguidance  # type: ignore[attr-defined]
    accepts.tokenizer = tokenizer  # type: ignore[attr-defined]
    return accepts


def test_llguidance_compiles_both_schema_forms(guidance: Any) -> None:
    matcher_cls = guidance.llguidance.LLMatcher
    for schema in (SCHEMA, plan_response_format()["json_schema"]["schema"]):
        grammar = matcher_cls.grammar_from_json_schema(schema)
        assert matcher_cls.validate_grammar_with_warnings(grammar, guidance.tokenizer) == (
            False,
            [],
        )


def _as_decoded(obj: dict[str, Any]) -> str:
    """JSON as llguidance writes strings: raw UTF-8, \\u escapes only below U+0080 (it requires
    one for DEL, which json.dumps leaves raw)."""
    return json.dumps(obj, ensure_ascii=False).replace("\x7f", "\\u007f")


def _schema_order(obj: dict[str, Any]) -> dict[str, Any]:
    """Keys in schema order (a decoder emits them in that order), unknown keys last."""
    order = list(SCHEMA["properties"]) + list(SCHEMA["properties"]["speech"]["properties"])
    ranked = sorted(obj, key=lambda k: order.index(k) if k in order else len(order))
    return {k: _schema_order(obj[k]) if isinstance(obj[k], dict) else obj[k] for k in ranked}


@pytest.mark.parametrize(
    "obj, valid",
    [
        (_plan(narration="a\nb", image_prompt=" x "), True),
        (_plan(narration="\u3000\n"), False),
        (_plan(narration="\x1c"), False),  # str.isspace; Rust's \s would call it a letter
        (_plan(narration="\ufeff"), True),  # not str.isspace; ECMA's \s would call it blank
        (_plan(speech=_speech(emotion="Happy")), False),
        (_plan(extra=1), False),
    ],
)
def test_llguidance_on_known_objects(guidance: Any, obj: dict[str, Any], valid: bool) -> None:
    assert guidance(_as_decoded(obj)) is valid
    assert _parser_accepts_without_repairs(obj) is valid


@settings(RELAXED, max_examples=200)
@given(obj=plan_like_objects())
def test_llguidance_agrees_with_parser_on_generated_objects(
    guidance: Any, obj: dict[str, Any]
) -> None:
    text = _as_decoded(_schema_order(obj))
    assert guidance(text) == _parser_accepts_without_repairs(obj), text
