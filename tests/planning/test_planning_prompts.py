"""The planner prompt variants: what each one tells the model, and how variants are keyed."""

from __future__ import annotations

import json

import pytest

from omnistory_core.contract import LABELS
from omnistory_core.planning.prompts import (
    PROMPT_VARIANTS,
    REFERENCE_NARRATION_CHARS,
    get_variant,
    render_user_text,
)
from omnistory_core.planning.testing import demo_planner_items


@pytest.fixture(scope="module")
def item():
    return demo_planner_items(limit=1)[0]


def test_at_least_two_variants_with_and_without_length_target():
    assert {"default", "paper_like"} <= set(PROMPT_VARIANTS)
    assert get_variant("default").target_chars == REFERENCE_NARRATION_CHARS == 107
    assert get_variant("paper_like").target_chars is None


def test_default_variant_states_the_length_target(item):
    text = render_user_text(item, get_variant("default"))
    assert "about 107 characters" in text
    assert "never more than 160" in text  # 1.5 x the target
    assert "about 80 characters" in render_user_text(item, get_variant("default"), 80)


def test_paper_like_variant_has_no_length_rule(item):
    text = render_user_text(item, get_variant("paper_like"))
    assert "characters" not in text.split("Plan the NEXT page")[1].split('"image_prompt"')[0]
    assert "in the style of the book" in text


@pytest.mark.parametrize("name", sorted(PROMPT_VARIANTS))
def test_prompt_carries_every_planner_input(item, name):
    text = render_user_text(item, get_variant(name))
    assert item["current_text"] in text
    assert json.dumps(item["metadata"], ensure_ascii=False, indent=2) in text
    assert json.dumps(item["conditions"], ensure_ascii=False, indent=2) in text
    assert "illustration is attached" in text
    for field, values in LABELS.items():
        assert f'"{field}": one of {", ".join(values)}' in text
    for key in ('"narration"', '"image_prompt"', '"speech"', '"speaker"', '"utterance"'):
        assert key in text


def test_braces_in_book_data_are_sent_verbatim():
    item = {
        "current_text": "She said {hello} and {0}.",
        "metadata": {"title": "{x}"},
        "conditions": {"scene": "a {curly} room"},
    }
    text = render_user_text(item, get_variant("default"))
    assert "She said {hello} and {0}." in text
    assert '"a {curly} room"' in text


def test_digest_changes_with_wording_and_target():
    digests = {v.digest() for v in PROMPT_VARIANTS.values()}
    assert len(digests) == len(PROMPT_VARIANTS)
    default = get_variant("default")
    assert default.digest() == default.digest(107)
    assert default.digest(80) != default.digest()


def test_unknown_variant_names_the_known_ones():
    with pytest.raises(KeyError, match="default, paper_like"):
        get_variant("chatty")
