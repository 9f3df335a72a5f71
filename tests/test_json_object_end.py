"""omnistory_core.plan_schema.json_object_end: the brace matching shared by the JSON salvages.

Checked on hand-written cases and, over many random texts made of the characters that matter,
against the plain character-by-character scan the judges' parser and MMaDA's answer reader used
before they called it: any difference would change which object they find.
"""

from __future__ import annotations

import random

import pytest

from omnistory_core.plan_schema import json_object_end


def reference_end(text: str, start: int, quotes: str = '"') -> int | None:
    """The character-by-character scan: depth counting outside strings, backslash escapes."""
    depth, in_string, escaped = 0, None, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string is not None:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == in_string:
                in_string = None
        elif char in quotes:
            in_string = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ('{"a": 1}', 0, 7),
        ('say {"a": {"b": 2}} and {"c": 3}', 4, 18),
        ('say {"a": {"b": 2}} and {"c": 3}', 10, 17),
        ('{"a": "}"}', 0, 9),  # a brace inside a string
        ('{"a": "\\"}"}', 0, 11),  # an escaped quote does not end the string
        ('{"a": "\\\\"}', 0, 10),  # an escaped backslash does not escape the quote
        ('{"a": {"b": 1}', 0, None),  # truncated
        ('{"a": "unterminated}', 0, None),
    ],
)
def test_matches_the_brace_that_closes_the_object(text: str, start: int, end: int | None) -> None:
    assert json_object_end(text, start) == end


def test_single_quotes_delimit_strings_only_when_asked() -> None:
    text = "{'a': '}'}"
    assert json_object_end(text, 0) == 7
    assert json_object_end(text, 0, quotes="\"'") == 9


def test_the_memo_is_read_and_filled() -> None:
    text = '{"a": {"b": {}}, "c": "{"} {'
    ends: dict[int, int | None] = {}
    assert json_object_end(text, 0, ends=ends) == 25
    assert ends == {12: 13, 6: 14, 0: 25}  # the inner braces met outside strings
    assert json_object_end(text, 27, ends=ends) is None and ends[27] is None
    ends[0] = 3  # consulted before scanning
    assert json_object_end(text, 0, ends=ends) == 3


def test_a_start_that_is_no_brace_is_refused() -> None:
    with pytest.raises(ValueError, match="no '\\{' at index 1"):
        json_object_end('{"a": 1}', 1)


@pytest.mark.parametrize("quotes", ['"', "\"'"])
def test_equals_the_character_scan_on_random_texts(quotes: str) -> None:
    rng = random.Random(20240611)
    alphabet = '{{{}}}""\\\'ab :,'
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
        ends: dict[int, int | None] = {}  # shared, as the callers share it over one text
        order = [i for i, c in enumerate(text) if c == "{"]
        rng.shuffle(order)
        for start in order:
            expected = reference_end(text, start, quotes)
            assert json_object_end(text, start, quotes=quotes) == expected, (text, start)
            assert json_object_end(text, start, quotes=quotes, ends=ends) == expected, (text, start)
