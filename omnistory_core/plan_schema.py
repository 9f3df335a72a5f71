"""The JSON-planning schema (v1) and a rule-based parser for planner output.

(Named ``omnistory_core.plan_schema`` before, which stays importable; the planner helpers are
:mod:`omnistory_core.kit.planning`.)

A planner (or a backbone that plans) returns raw text; :func:`parse_plan` turns it into a
:class:`~omnistory_core.contract.Plan` or a :class:`~omnistory_core.contract.Failure`, together
with the names of the rule-based repairs it applied.  Repairs only change *syntax* (fences,
surrounding prose, quotes, commas, label spelling, the official code's field names); they never
invent content, so a plan with a missing utterance stays a failure rather than getting a default
speaker or voice (the official code's Narrator/neutral/female fallback is a bias we do not copy).

Failure categories and their precedence
---------------------------------------
When an output has several problems, ``failure.category`` is the first category in this order and
``failure.message`` lists every problem found (in the same order, then in schema field order):

1. ``plan_json_error``: no JSON object can be recovered (empty or unparseable text, a top-level
   value that is not an object, a truncated object, a non-``str`` input).
2. ``plan_missing_field``: a required field is absent, ``null``, empty or whitespace-only, or has
   the wrong type (a text field that is not a string, ``speech`` that is not an object).  Numbers
   are not coerced to text: that would make up text the model did not write.
3. ``plan_invalid_label``: a voice label (emotion/speed/pitch/gender) that, after trimming and
   lower-casing, is not in its set, or that is not a string at all (``"emotion": 3``).
4. ``unusable_image_prompt``: ``image_prompt`` is a string with no non-whitespace character.

The order goes from "the model did not produce the schema" to "the schema is filled but one value
is unusable", so the category names the most basic thing that went wrong.  Whitespace means
``str.isspace`` (29 code points); the schema's non-blank ``pattern`` spells out exactly that set
instead of using ``\\s``, whose meaning differs between Python, ECMA-262 and Rust regex engines
(U+001C-U+001F, U+FEFF), so the parser, jsonschema and grammar-constrained decoders agree.
Any failure gives ``plan=None``: the paper counts such examples as orchestration failures with
all three outputs missing.

Repairs (stable names, see :data:`REPAIRS`)
-------------------------------------------
``strip_code_fence``, ``extract_json_object`` (balanced-brace scan that skips braces inside
strings), ``normalize_smart_quotes`` (only curly quotes used as string delimiters; curly quotes
inside a string are kept), ``remove_trailing_commas``, ``allow_control_characters`` (raw newlines
or tabs inside strings), ``python_literal`` (``ast.literal_eval``, never ``eval``),
``map_official_shape`` (``text``/``t2i``/``speech_metadata.speaker{name,line,...}``),
``drop_unknown_fields``, ``strip_label_whitespace``, ``normalize_label_case``.  Text fields
(narration, image prompt, utterance, speaker) are kept verbatim, surrounding whitespace included.

The work is bounded for any input: the brace scan is near linear, and at most 256 balanced
candidates (1,000,000 characters after the first) are handed to the repair ladder, so a plan
preceded by more brace groups than that in prose is reported as ``plan_json_error``.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from omnistory_core.contract import LABELS, Failure, Plan, SpeechTarget

PLAN_SCHEMA_VERSION = "1"
PLAN_SCHEMA_RESOURCE = f"plan.v{PLAN_SCHEMA_VERSION}.schema.json"

PLAN_FAILURE_CATEGORIES: tuple[str, ...] = (
    "plan_json_error",
    "plan_missing_field",
    "plan_invalid_label",
    "unusable_image_prompt",
)
"""The categories :func:`parse_plan` can return, in precedence order."""

REPAIRS: tuple[str, ...] = (
    "strip_code_fence",
    "extract_json_object",
    "normalize_smart_quotes",
    "remove_trailing_commas",
    "allow_control_characters",
    "python_literal",
    "map_official_shape",
    "drop_unknown_fields",
    "strip_label_whitespace",
    "normalize_label_case",
)
"""Every repair name :func:`parse_plan` may report, in the order they are applied."""

TEXT_FIELDS = ("narration", "image_prompt")
SPEECH_TEXT_FIELDS = ("utterance", "speaker")
LABEL_FIELDS = tuple(LABELS)  # emotion, speed, pitch, gender
SPEECH_FIELDS = SPEECH_TEXT_FIELDS + LABEL_FIELDS
PLAN_FIELDS = TEXT_FIELDS + ("speech",)

# Our field path -> the official code's path, used to name fields in messages.
OFFICIAL_PATHS: dict[str, str] = {
    "narration": "text",
    "image_prompt": "t2i",
    "speech": "speech_metadata.speaker",
    "speech.utterance": "speech_metadata.speaker.line",
    "speech.speaker": "speech_metadata.speaker.name",
    **{f"speech.{k}": f"speech_metadata.speaker.{k}" for k in LABEL_FIELDS},
}
_OFFICIAL_TOP = ("text", "t2i", "speech_metadata")
_OFFICIAL_SPEAKER = {"line": "utterance", "name": "speaker", **{k: k for k in LABEL_FIELDS}}

# Bounds on the brace search per quoting mode: balanced candidates parsed, and fresh scans that
# run to the end of the text unclosed (each costs O(len(text))).
_MAX_CANDIDATES = 256
_MAX_UNCLOSED_SCANS = 16
# Characters handed to the repair ladder across candidates after the first: nested candidates
# overlap, so without it 256 of them could cost 256 passes over a long output.
_MAX_CANDIDATE_CHARS = 1_000_000
_PREVIEW = 60
_MISSING = object()


# -- schema -------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _schema_text() -> str:
    return (
        resources.files("omnistory_core.schemas")
        .joinpath(PLAN_SCHEMA_RESOURCE)
        .read_text(encoding="utf-8")
    )


def plan_json_schema() -> dict[str, Any]:
    """The Plan JSON Schema (draft 2020-12), loaded from the package data (a fresh copy).

    It stays inside the structured-output subset of OpenAI and vLLM: every object lists all its
    properties as required with ``additionalProperties: false``, no ``oneOf``/``anyOf``, and the
    non-empty rule is a ``pattern`` (``minLength`` is not accepted by OpenAI's strict mode).  The
    pattern means "contains a character that is not ``str.isspace``" whether an engine anchors
    it (grammar-based decoders) or searches (JSON Schema validators).
    """
    return json.loads(_schema_text())


def plan_response_format(name: str = f"omnistory_plan_v{PLAN_SCHEMA_VERSION}") -> dict[str, Any]:
    """An OpenAI-style ``response_format`` (also accepted by vLLM's OpenAI server) for the Plan.

    ``$schema`` and ``$id`` are dropped: they only identify the file, and some structured-output
    endpoints reject keywords outside their subset.
    """
    schema = {k: v for k, v in plan_json_schema().items() if k not in ("$schema", "$id")}
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


# -- result -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanParseResult:
    """Outcome of :func:`parse_plan`: exactly one of ``plan`` and ``failure`` is set."""

    plan: Plan | None
    failure: Failure | None
    repairs: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.plan is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able record (for ``plans.jsonl``)."""
        return {
            "plan": self.plan.to_dict() if self.plan is not None else None,
            "failure": self.failure.to_dict() if self.failure is not None else None,
            "repairs": list(self.repairs),
        }


class _Repairs:
    """An ordered set of repair names."""

    def __init__(self) -> None:
        self._names: set[str] = set()

    def add(self, name: str) -> None:
        assert name in REPAIRS, name
        self._names.add(name)

    def update(self, names: list[str] | tuple[str, ...]) -> None:
        for name in names:
            self.add(name)

    def as_list(self) -> list[str]:
        return [r for r in REPAIRS if r in self._names]


# -- public API ---------------------------------------------------------------------------------


def parse_plan(raw_text: str) -> PlanParseResult:
    """Parse a planner's raw output into a :class:`Plan` (or a plan failure); never raises.

    See the module docstring for the repairs, the failure categories and their precedence.
    A non-``str`` input (``None``, ``bytes``, ...) is a ``plan_json_error``.
    """
    repairs = _Repairs()
    try:
        if not isinstance(raw_text, str):
            return _failed(
                "plan_json_error",
                f"planner output must be a str, got {type(raw_text).__name__}",
                repairs,
            )
        obj, error = _locate_object(raw_text, repairs)
        if error is not None or obj is None:
            return _failed("plan_json_error", error or "no JSON object found", repairs)
        return _validate(obj, repairs)
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises"; keep it as data
        return _failed(
            "plan_json_error", f"planner output could not be parsed ({type(exc).__name__})", repairs
        )


@dataclass(frozen=True)
class PartialPlanResult:
    """Outcome of :func:`parse_partial_plan`: the requested fields that are usable, and why each
    of the others is not (``failure`` is set instead when no JSON object could be recovered)."""

    values: dict[str, str]
    problems: dict[str, Failure]
    failure: Failure | None = None
    repairs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "values": dict(self.values),
            "problems": {k: v.to_dict() for k, v in self.problems.items()},
            "failure": self.failure.to_dict() if self.failure is not None else None,
            "repairs": list(self.repairs),
        }


def parse_partial_plan(
    raw: dict[str, Any] | str | None, paths: tuple[str, ...]
) -> PartialPlanResult:
    """Validate only ``paths`` (``image_prompt``, ``narration``, ``speech.utterance``, ...) of a
    backbone's plan; never raises.

    A backbone hands experts just the plan fields of the modalities it does not make itself, so a
    T+S model's plan has no ``speech`` and a T+I model's none of ``image_prompt``.  The same
    syntax repairs and value rules as :func:`parse_plan` apply per field; an absent field is
    reported as ``upstream_failed`` (the expert that needs it has no input), a present but unusable
    one with the category ``parse_plan`` would give it.  A ``str`` is raw model text.
    """
    repairs = _Repairs()
    try:
        if raw is None:
            return PartialPlanResult(
                {}, {}, Failure("upstream_failed", "the backbone returned no plan")
            )
        if isinstance(raw, str):
            obj, error = _locate_object(raw, repairs)
            if error is not None:
                return PartialPlanResult(
                    {}, {}, Failure("plan_json_error", error), repairs.as_list()
                )
        elif isinstance(raw, dict):
            obj = raw
        else:
            return PartialPlanResult(
                {},
                {},
                Failure("plan_json_error", f"plan must be a dict or str, got {_type_name(raw)}"),
            )
        assert obj is not None
        if not any(k in obj for k in PLAN_FIELDS) and any(k in obj for k in _OFFICIAL_TOP):
            obj = _map_official(obj, repairs)
        values: dict[str, str] = {}
        problems: dict[str, Failure] = {}
        for path in paths:
            head, _, leaf = path.partition(".")
            container: Any = obj
            if leaf:
                container = obj.get(head, _MISSING)
                if not isinstance(container, dict):
                    problems[path] = Failure(
                        "upstream_failed",
                        f"the backbone's plan has no {head} object (needed: {path})",
                    )
                    continue
            key = leaf or head
            value = container.get(key, _MISSING)
            if value is _MISSING or value is None:
                problems[path] = Failure("upstream_failed", f"the backbone's plan has no {path}")
                continue
            found: list[tuple[str, str]] = []

            def report(category: str, _path: str, message: str, _found=found) -> None:
                _found.append((category, message))

            if key in LABEL_FIELDS:
                checked = _check_label(value, key, path, report, repairs)
            else:
                checked = _check_text(value, key, report)
            if found:
                category, message = found[0]
                problems[path] = Failure(category, f"{path}: {message}")
            else:
                values[path] = checked
        return PartialPlanResult(values, problems, None, repairs.as_list())
    except Exception as exc:  # noqa: BLE001 - never raises, like parse_plan
        return PartialPlanResult(
            {}, {}, Failure("plan_json_error", f"plan could not be parsed ({type(exc).__name__})")
        )


def plan_to_json(plan: Plan) -> str:
    """Canonical JSON text of a plan (schema field order, compact, UTF-8 characters kept).

    Raises ``ValueError`` naming the field if the plan would not parse back unchanged (an empty
    text, a label outside its set), so a planner that builds plans directly cannot emit one that
    :func:`parse_plan` rejects or repairs (``TypeError`` if a field is not JSON-serialisable).
    """
    text = json.dumps(plan.to_dict(), ensure_ascii=False, separators=(",", ":"))
    result = parse_plan(text)
    if result.failure is not None:
        raise ValueError(f"invalid plan ({result.failure.category}): {result.failure.message}")
    if result.repairs or result.plan != plan:
        raise ValueError(f"plan is not canonical (parsing it applies {result.repairs})")
    return text


# -- locating the JSON object -------------------------------------------------------------------

_FENCE_RE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)


def _fence_body(text: str) -> str | None:
    """The body of the first fenced block that contains a ``{`` (else of the first block)."""
    bodies = [m.group(1) for m in _FENCE_RE.finditer(text)]
    if not bodies:
        return None
    return next((b for b in bodies if "{" in b), bodies[0])


def _locate_object(text: str, repairs: _Repairs) -> tuple[dict[Any, Any] | None, str | None]:
    """Find the plan object in the raw text: (object, None) or (None, error message).

    The whole output is tried first (so a valid plan whose strings mention a code fence is not
    cut), then the body of a code fence, then a balanced-brace scan over the whole output.
    """
    if not text.strip():
        return None, "planner output is empty" if not text else "planner output is only whitespace"
    attempts: list[tuple[str, list[str]]] = [(text, [])]
    fenced = _fence_body(text)
    if fenced is not None and fenced.strip():
        attempts.append((fenced, ["strip_code_fence"]))
    for body, body_repairs in attempts:
        value, used, error = _load(body.strip())
        if error is None:
            if isinstance(value, dict):
                repairs.update(body_repairs + used)
                return value, None
            where = " inside the code fence" if body_repairs else ""
            return None, f"expected a JSON object{where}, got {_type_name(value)}"
    errors: list[str] = []
    for body, body_repairs in reversed(attempts):  # the fence body first
        obj, used, error = _extract(body)
        if obj is not None:
            repairs.update(body_repairs + ["extract_json_object"] + used)
            return obj, None
        if error not in errors:
            errors.append(error)
    return None, f"{'; '.join(errors)}; output starts {_preview(text)}"


def _load(text: str) -> tuple[Any, list[str], str | None]:
    """Parse one JSON candidate with the repair ladder: (value, repairs used, error or None).

    Cheapest first: strict JSON, then JSON with raw control characters, each on the text as is,
    with smart-quote delimiters repaired, then also trailing commas; last, a Python literal.
    """
    tried: list[tuple[str, list[str]]] = []
    first_error: str | None = None
    for variant, used in _syntax_variants(text):
        tried.append((variant, used))
        for strict in (True, False):
            try:
                value = json.loads(variant, strict=strict)
            except Exception as exc:  # noqa: BLE001 - ValueError, RecursionError, MemoryError
                first_error = first_error or f"invalid JSON: {exc}"
                continue
            return value, used + ([] if strict else ["allow_control_characters"]), None
    for variant, used in tried[:2]:  # trailing commas are valid Python already
        try:
            # invalid escapes in model text make compile() warn; they are not our warnings.
            # (catch_warnings is process-global: harmless here, we only silence.)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = ast.literal_eval(variant)
        except Exception:  # noqa: BLE001 - SyntaxError, ValueError, MemoryError, RecursionError...
            continue
        return value, used + ["python_literal"], None
    return None, [], first_error or "invalid JSON"


def _syntax_variants(text: str) -> Iterator[tuple[str, list[str]]]:
    """The candidate text, then (lazily) each cumulative character-level repair that changes it."""
    yield text, []
    current, used = text, []
    smart = _normalize_smart_quotes(current)
    if smart != current:
        current, used = smart, ["normalize_smart_quotes"]
        yield current, used
    commas = _remove_trailing_commas(current)
    if commas != current:
        yield commas, used + ["remove_trailing_commas"]


_SCAN_RE = {
    '"': re.compile(r'[{}"\\]'),
    "\"'": re.compile(r"[{}\"'\\]"),
}


def json_object_end(
    text: str, start: int, *, quotes: str = '"', ends: dict[int, int | None] | None = None
) -> int | None:
    """The index of the ``}`` that closes the ``{`` at ``text[start]``, or None when it is never
    closed (truncated output); braces inside strings do not count.

    This is the brace matching every salvage of a JSON object from model text needs (the plan
    parser here, a judge's answer parser, a backbone reading its model's JSON answer), while what
    each accepts as *the* object stays its own.  Strings are delimited by ``"`` (JSON); with
    ``quotes`` set to both quote characters (``"'``), by ``'`` too (Python literals).  A
    backslash inside a string escapes the next character.

    ``ends``, a dict kept between calls on the same ``text`` and ``quotes``, is consulted first
    and receives the closing index (None: never closed) of ``start`` and of every ``{`` met
    outside a string on the way: a fresh scan from such a brace would be in the same state, so
    matching every ``{`` of a text stays near linear.
    """
    if ends is None:
        ends = {}
    elif start in ends:
        return ends[start]
    if text[start : start + 1] != "{":
        raise ValueError(f"no '{{' at index {start}")
    stack: list[int] = []
    in_string: str | None = None
    escaped_at = -1
    for match in _SCAN_RE[quotes].finditer(text, start):
        pos, ch = match.start(), match.group()
        if in_string is not None:
            if pos == escaped_at:
                continue
            if ch == "\\":
                escaped_at = pos + 1
            elif ch == in_string:
                in_string = None
        elif ch in quotes:
            in_string = ch
        elif ch == "{":
            stack.append(pos)
        elif ch == "}":
            ends[stack.pop()] = pos
            if not stack:
                return pos
    for pos in stack:
        ends[pos] = None
    return None


def _extract(text: str) -> tuple[dict[Any, Any] | None, list[str], str]:
    """Find a JSON object inside prose: the first balanced ``{...}`` that parses to an object
    with a plan key (ours or the official code's).  Failing that, the first object that parses,
    unless some ``{`` is never closed: then the output was cut off, and an inner object (such
    as the ``speech`` of a truncated plan) must not stand in for the plan.

    Strings are tracked with double quotes only (JSON), then also with single quotes (Python
    literals); an apostrophe in JSON text would otherwise look like an unclosed string.
    """
    if "{" not in text:
        return None, [], "no JSON object in the planner output"
    parsed: dict[tuple[int, int], bool] = {}
    first: tuple[dict[Any, Any], list[str]] | None = None
    first_error: str | None = None
    unclosed: int | None = None
    spent = 0
    for quotes in ('"', "\"'") if "'" in text else ('"',):
        ends: dict[int, int | None] = {}
        start = text.find("{")
        candidates = unclosed_scans = 0
        while start != -1 and candidates < _MAX_CANDIDATES and unclosed_scans < _MAX_UNCLOSED_SCANS:
            if start not in ends:
                unclosed_scans += json_object_end(text, start, quotes=quotes, ends=ends) is None
            end = ends[start]
            if end is None:
                if quotes == '"' and unclosed is None:
                    unclosed = start
                start = text.find("{", start + 1)
                continue
            candidates += 1
            spent += end + 1 - start
            if spent > _MAX_CANDIDATE_CHARS and parsed:
                break
            if (start, end) not in parsed:
                value, used, error = _load(text[start : end + 1])
                parsed[start, end] = isinstance(value, dict) and error is None
                if parsed[start, end]:
                    if _has_plan_key(value):
                        return value, used, ""
                    first = first or (value, used)
                else:
                    first_error = first_error or error
            start = text.find("{", end + 1 if parsed[start, end] else start + 1)
    if unclosed is not None:
        return (
            None,
            [],
            f"a JSON object starts at character {unclosed} but is never closed (truncated output?)",
        )
    if first is not None:
        return first[0], first[1], ""
    return None, [], f"no brace-delimited candidate parses ({first_error})"


def _has_plan_key(value: dict[Any, Any]) -> bool:
    return any(k in value for k in PLAN_FIELDS + _OFFICIAL_TOP)


# -- character-level repairs --------------------------------------------------------------------
# Regex-driven so that the work per candidate is C-speed and linear in its length.

_SMART = "\u201c\u201d\u201e\u201f\u2018\u2019\u201a\u201b"
_SMART_QUOTE_RE = re.compile(f"[{_SMART}]")
_ANY_QUOTE_RE = re.compile(f'["{_SMART}]')
# a JSON string from its opening quote; an unterminated one runs to the end of the text
_JSON_STRING_RE = re.compile(r'"[^"\\]*(?:\\[\s\S][^"\\]*)*(?:"|\\?\Z)')
# a quote that can close a curly-quoted string: followed by : , } ] or the end of the text
_SMART_CLOSER_RE = re.compile(f'["{_SMART}]' + r"(?=\s*(?:[:,}\]]|\Z))")
_BARE_QUOTE_RE = re.compile(r'\\[\s\S]|"')
_TRAILING_COMMA_RE = re.compile(r",\s*[}\]]")
_STRING_OR_TRAILING_COMMA_RE = re.compile(_JSON_STRING_RE.pattern + r"|,(?=\s*[}\]])")


def _normalize_smart_quotes(text: str) -> str:
    """Turn curly quotes that delimit strings into ``"``; curly quotes inside strings are kept.

    A string opened by a curly quote outside any JSON string ends at the first curly (or
    straight) quote followed by ``:``, ``,``, ``}``, ``]`` or the end of the text; a bare ``"``
    in its content is escaped.
    """
    if _SMART_QUOTE_RE.search(text) is None:
        return text
    out: list[str] = []
    i = 0
    while (quote := _ANY_QUOTE_RE.search(text, i)) is not None:
        q = quote.start()
        if text[q] == '"':
            end = _JSON_STRING_RE.match(text, q).end()  # type: ignore[union-attr]
            out.append(text[i:end])
            i = end
            continue
        close = _SMART_CLOSER_RE.search(text, q + 1)
        if close is None:
            break  # no closer after this opener, so none after any later one either
        content = _BARE_QUOTE_RE.sub(
            lambda m: '\\"' if m.group() == '"' else m.group(), text[q + 1 : close.start()]
        )
        out.append(text[i:q] + '"' + content + '"')
        i = close.end()
    out.append(text[i:])
    return "".join(out)


def _remove_trailing_commas(text: str) -> str:
    """Drop a ``,`` directly (whitespace aside) before ``}`` or ``]``, outside JSON strings."""
    if _TRAILING_COMMA_RE.search(text) is None:  # cheap check before the full pass
        return text
    return _STRING_OR_TRAILING_COMMA_RE.sub(lambda m: "" if m.group() == "," else m.group(), text)


# -- validation ---------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class _Problem:
    rank: int  # index in PLAN_FAILURE_CATEGORIES
    order: int  # schema field order
    category: str = field(compare=False)
    message: str = field(compare=False)


_Report = Callable[[str, str, str], None]  # (category, field path, message)

_FIELD_ORDER = {
    p: i
    for i, p in enumerate(
        ("narration", "image_prompt", "speech") + tuple(f"speech.{k}" for k in SPEECH_FIELDS)
    )
}


def _map_official(obj: dict[Any, Any], repairs: _Repairs) -> dict[Any, Any]:
    """Rename the official code's shape to ours, leaving absent fields absent (never defaults)."""
    mapped: dict[Any, Any] = {}
    if "text" in obj:
        mapped["narration"] = obj["text"]
    if "t2i" in obj:
        mapped["image_prompt"] = obj["t2i"]
    meta = obj.get("speech_metadata", _MISSING)
    if isinstance(meta, dict):
        speaker = meta.get("speaker", _MISSING)
        if isinstance(speaker, dict):
            mapped["speech"] = {
                ours: speaker[theirs]
                for theirs, ours in _OFFICIAL_SPEAKER.items()
                if theirs in speaker
            }
            if any(k not in _OFFICIAL_SPEAKER for k in speaker):
                repairs.add("drop_unknown_fields")
        elif speaker is not _MISSING:
            mapped["speech"] = speaker
        if any(k != "speaker" for k in meta):
            repairs.add("drop_unknown_fields")
    elif meta is not _MISSING:
        mapped["speech"] = meta
    if any(k not in _OFFICIAL_TOP for k in obj):
        repairs.add("drop_unknown_fields")
    repairs.add("map_official_shape")
    return mapped


def _validate(obj: dict[Any, Any], repairs: _Repairs) -> PlanParseResult:
    official = not any(k in obj for k in PLAN_FIELDS) and any(k in obj for k in _OFFICIAL_TOP)
    if official:
        obj = _map_official(obj, repairs)
    elif any(k not in PLAN_FIELDS for k in obj):
        repairs.add("drop_unknown_fields")

    def name(path: str) -> str:
        return f"{OFFICIAL_PATHS[path]} (plan field {path})" if official else path

    problems: list[_Problem] = []

    def problem(category: str, path: str, message: str) -> None:
        rank = PLAN_FAILURE_CATEGORIES.index(category)
        problems.append(_Problem(rank, _FIELD_ORDER[path], category, f"{name(path)}: {message}"))

    values: dict[str, str] = {}
    for key in TEXT_FIELDS:
        values[key] = _check_text(obj.get(key, _MISSING), key, problem)
    speech = obj.get("speech", _MISSING)
    speech_values: dict[str, str] = {}
    if speech is _MISSING or speech is None:
        problem("plan_missing_field", "speech", "is missing" if speech is _MISSING else "is null")
    elif not isinstance(speech, dict):
        problem("plan_missing_field", "speech", f"expected an object, got {_type_name(speech)}")
    else:
        if not official and any(k not in SPEECH_FIELDS for k in speech):
            repairs.add("drop_unknown_fields")
        for key in SPEECH_TEXT_FIELDS:
            speech_values[key] = _check_text(speech.get(key, _MISSING), f"speech.{key}", problem)
        for key in LABEL_FIELDS:
            speech_values[key] = _check_label(
                speech.get(key, _MISSING), key, f"speech.{key}", problem, repairs
            )
    if problems:
        problems.sort()
        message = "; ".join(p.message for p in problems)
        return _failed(problems[0].category, message, repairs)
    plan = Plan(
        narration=values["narration"],
        image_prompt=values["image_prompt"],
        speech=SpeechTarget(**speech_values),
    )
    return PlanParseResult(plan=plan, failure=None, repairs=repairs.as_list())


def _check_text(value: Any, path: str, problem: _Report) -> str:
    if value is _MISSING:
        problem("plan_missing_field", path, "is missing")
    elif value is None:
        problem("plan_missing_field", path, "is null")
    elif not isinstance(value, str):
        problem("plan_missing_field", path, f"expected a string, got {_describe(value)}")
    elif value.strip() == "":
        what = "empty" if value == "" else "only whitespace"
        if path == "image_prompt":
            problem("unusable_image_prompt", path, f"is {what}")
        else:
            problem("plan_missing_field", path, f"is {what}")
    else:
        return value
    return ""


def _check_label(value: Any, label: str, path: str, problem: _Report, repairs: _Repairs) -> str:
    allowed = LABELS[label]
    if value is _MISSING:
        problem("plan_missing_field", path, "is missing")
    elif value is None:
        problem("plan_missing_field", path, "is null")
    elif not isinstance(value, str):
        problem(
            "plan_invalid_label",
            path,
            f"expected one of {', '.join(allowed)}, got {_describe(value)}",
        )
    elif value.strip() == "":
        problem("plan_missing_field", path, "is empty" if value == "" else "is only whitespace")
    elif value in allowed:
        return value
    elif value.strip().lower() in allowed:
        if value.strip() != value:
            repairs.add("strip_label_whitespace")
        if value.strip().lower() != value.strip():
            repairs.add("normalize_label_case")
        return value.strip().lower()
    else:
        problem("plan_invalid_label", path, f"{value!r} is not one of {', '.join(allowed)}")
    return ""


# -- helpers ------------------------------------------------------------------------------------


def _failed(category: str, message: str, repairs: _Repairs) -> PlanParseResult:
    return PlanParseResult(
        plan=None, failure=Failure(category=category, message=message), repairs=repairs.as_list()
    )


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > _PREVIEW:
        text = text[: _PREVIEW - 3] + "..."
    return f"{_type_name(value)} {text}"


def _preview(text: str) -> str:
    return repr(text[:_PREVIEW] + ("..." if len(text) > _PREVIEW else ""))


__all__ = [
    "LABEL_FIELDS",
    "OFFICIAL_PATHS",
    "PLAN_FAILURE_CATEGORIES",
    "PartialPlanResult",
    "json_object_end",
    "parse_partial_plan",
    "PLAN_SCHEMA_VERSION",
    "REPAIRS",
    "PlanParseResult",
    "parse_plan",
    "plan_json_schema",
    "plan_response_format",
    "plan_to_json",
]
