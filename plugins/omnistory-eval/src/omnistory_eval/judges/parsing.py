"""Validation of judge answers against the four-criterion schema, with local normalization.

:func:`parse_judge_response` first tries the answer as strict JSON with exactly the required
schema.  If that fails it normalizes locally, in this order, and accepts the first candidate that
yields all four criteria: the whole answer, the bodies of Markdown code fences, and every balanced
``{...}`` object found in surrounding prose; each tried as is, with typographic quotes and
trailing commas fixed, with Python literals (``True``/``None``, single quotes) read, and with the
closing brackets of an answer cut off after its last complete value restored.  Within a candidate,
criterion keys match ignoring case and punctuation, ``score`` may be an integer-valued number or
numeric string, and ``rationale`` may be called ``reason``/``explanation``/``justification``.

A score outside 1-10, a missing or empty rationale, or a missing criterion make the answer invalid:
nothing is clamped or guessed here.  Answers still invalid go to the stage-end repair pass
(:mod:`.repair`), except empty ones.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from omnistory_core.plan_schema import json_object_end
from omnistory_eval.judges.rubric import SCORE_MAX, SCORE_MIN, criteria_for

EMPTY_RESPONSE = "empty response"

_SCORE_KEYS = {"score", "rating", "value"}
_RATIONALE_KEYS = {"rationale", "reason", "explanation", "justification"}
_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.S)
_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'"})
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_INT_TEXT = re.compile(r"\s*(\d+)(?:\.0+)?\s*")


@dataclass(frozen=True)
class JudgeParse:
    """The outcome of validating one judge answer.

    ``scores`` maps each criterion to an int in 1-10 (``None`` unless all four are valid),
    ``rationales`` likewise; ``failure`` says why the answer is invalid (``None`` when valid);
    ``method`` is ``"direct"`` (schema-exact JSON), ``"normalized"`` (valid after local
    normalization), ``"empty"`` or ``"unresolved"``.
    """

    scores: dict[str, int] | None
    rationales: dict[str, str] | None
    failure: str | None
    method: str

    @property
    def ok(self) -> bool:
        return self.failure is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "scores": self.scores,
            "rationales": self.rationales,
            "failure": self.failure,
            "method": self.method,
        }


def _signature(key: Any) -> str:
    return re.sub(r"[^a-z0-9]", "", str(key).lower())


def _strict(value: Any, keys: tuple[str, ...]) -> tuple[dict[str, int], dict[str, str]] | str:
    """Exact schema check; returns (scores, rationales) or the first violation."""
    if not isinstance(value, dict):
        return "the answer is not a JSON object"
    if set(value) != set(keys):
        missing = [k for k in keys if k not in value]
        extra = [k for k in value if k not in keys]
        return f"keys differ from the schema (missing {missing}, unexpected {extra})"
    scores, rationales = {}, {}
    for key in keys:
        entry = value[key]
        if not isinstance(entry, dict) or set(entry) != {"score", "rationale"}:
            return f"{key!r} must be an object with exactly 'score' and 'rationale'"
        score, rationale = entry["score"], entry["rationale"]
        if isinstance(score, bool) or not isinstance(score, int):
            return f"{key!r}: score {score!r} is not an integer"
        if not SCORE_MIN <= score <= SCORE_MAX:
            return f"{key!r}: score {score} is outside {SCORE_MIN}-{SCORE_MAX}"
        if not isinstance(rationale, str) or not rationale.strip():
            return f"{key!r}: rationale must be a non-empty string"
        scores[key], rationales[key] = score, rationale.strip()
    return scores, rationales


# -- candidate JSON texts ----------------------------------------------------------------------


def _balanced_objects(text: str) -> Iterator[str]:
    """Every ``{...}`` substring whose braces balance outside JSON strings, outermost first
    (from every ``{``, those inside strings too)."""
    ends: dict[int, int | None] = {}
    for start, char in enumerate(text):
        if char == "{":
            end = json_object_end(text, start, ends=ends)
            if end is not None:
                yield text[start : end + 1]


def _close_truncated(text: str) -> str | None:
    """Append the closing brackets of an answer cut off between values; None if not possible."""
    stack: list[str] = []
    in_string, escaped = False, False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            stack.append("}" if c == "{" else "]")
        elif c in "}]":
            if not stack or stack.pop() != c:
                return None
    if in_string or not stack:
        return None
    body = text.rstrip().removesuffix(",").rstrip()
    if not body or body.endswith(":"):
        return None
    return body + "".join(reversed(stack))


def _candidate_texts(raw: str) -> Iterator[str]:
    seen: set[str] = set()
    sources = [raw.strip()]
    sources += [m.group(1).strip() for m in _FENCE.finditer(raw)]
    if "```" in raw:  # an opening fence whose closing fence was cut off
        sources.append(raw.split("```", 1)[1].partition("\n")[2].strip())
    sources += list(_balanced_objects(raw))
    brace = raw.find("{")
    if brace > 0:  # prose before a (possibly truncated) object
        sources.append(raw[brace:].strip())
    for source in sources:
        base = source.translate(_QUOTES)
        fixed = _TRAILING_COMMA.sub(r"\1", base)
        for variant in (source, base, fixed):
            for text in (variant, _close_truncated(variant)):
                if text and text not in seen:
                    seen.add(text)
                    yield text


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        # judges sometimes answer with a Python dict (single quotes, True/None)
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None


# -- lenient extraction ------------------------------------------------------------------------


def _find_key(value: Any, signature: str) -> Any:
    """The value of the first key matching ``signature``, searching nested objects and lists."""
    if isinstance(value, Mapping):
        for key, nested in value.items():
            if _signature(key) == signature:
                return nested
        children = list(value.values())
    elif isinstance(value, list):
        children = value
    else:
        return None
    for child in children:
        found = _find_key(child, signature)
        if found is not None:
            return found
    return None


def _as_score(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = _INT_TEXT.fullmatch(value)
        if match:
            return int(match.group(1))
    return None


def _lenient(value: Any, keys: tuple[str, ...]) -> tuple[dict[str, int], dict[str, str]] | str:
    if not isinstance(value, (Mapping, list)):
        return "no JSON object found"
    scores, rationales, problems = {}, {}, []
    for key in keys:
        entry = _find_key(value, _signature(key))
        if not isinstance(entry, Mapping):
            problems.append(f"{key!r} missing")
            continue
        score = rationale = None
        for field, item in entry.items():
            sig = _signature(field)
            if sig in _SCORE_KEYS:
                score = _as_score(item)
                if score is None:
                    problems.append(f"{key!r}: score {item!r} is not an integer")
            elif sig in _RATIONALE_KEYS and isinstance(item, str) and item.strip():
                rationale = item.strip()
        if score is None:
            if not any(p.startswith(f"{key!r}: score") for p in problems):
                problems.append(f"{key!r}: score missing")
            continue
        if not SCORE_MIN <= score <= SCORE_MAX:
            problems.append(f"{key!r}: score {score} is outside {SCORE_MIN}-{SCORE_MAX}")
            continue
        if rationale is None:
            problems.append(f"{key!r}: rationale missing or empty")
            continue
        scores[key], rationales[key] = score, rationale
    if problems:
        return "; ".join(problems)
    return scores, rationales


def parse_judge_response(raw: str | None, track: str) -> JudgeParse:
    """Validate one judge answer for ``track`` (``text``/``image``/``speech``/``omni``)."""
    keys = criteria_for(track)
    if raw is None or not str(raw).strip():
        return JudgeParse(None, None, EMPTY_RESPONSE, "empty")
    raw = str(raw)
    try:
        direct = json.loads(raw.strip())
    except json.JSONDecodeError as exc:
        first_error = f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    else:
        checked = _strict(direct, keys)
        if not isinstance(checked, str):
            return JudgeParse(checked[0], checked[1], None, "direct")
        first_error = checked
    best_error: str | None = None
    best_found = -1
    for text in _candidate_texts(raw):
        value = _load(text)
        if value is None:
            continue
        checked = _lenient(value, keys)
        if not isinstance(checked, str):
            return JudgeParse(checked[0], checked[1], None, "normalized")
        # keep the diagnosis of the candidate that got furthest
        found = sum(1 for k in keys if f"{k!r} missing" not in checked)
        if found > best_found:
            best_found, best_error = found, checked
    failure = first_error
    if best_error is not None:
        failure = f"{first_error}; after normalization: {best_error}"
    return JudgeParse(None, None, failure, "unresolved")
