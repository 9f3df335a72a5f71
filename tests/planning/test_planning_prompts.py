"""The planner prompt variants: what each one tells the model, and how variants are keyed."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from omnistory_testkit import demo_planner_items

from omnistory_core.contract import LABELS
from omnistory_core.kit.planning.prompts import (
    PROMPT_VARIANTS,
    REFERENCE_NARRATION_CHARS,
    SYSTEM_PROMPT,
    get_variant,
    render_user_text,
)


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
    with pytest.raises(KeyError, match="default, official, paper_like"):
        get_variant("chatty")


# -- the ``official`` variant ---------------------------------------------------------------------

#: SHA-256 (first 12 hex digits) of every run of 6 consecutive words (lower case, letters and digits
#: only) of the official Omni-StoryBench orchestration prompt (system prompt and user template of
#: src/orchestrator.py at commit cde925d).  Only the digests are kept, so the test can check that no
#: wording was taken over without the repository holding that wording.
OFFICIAL_SHINGLE_DIGESTS = frozenset(
    (
        "0225666a46ae 03e4e82fb198 0431bccda961 04dfcd0b5f87 0670ce12a6eb 07e721f491ce "
        "0889600820dc 0a13078b33c9 0c0b844a17be 0c82c005aa85 100cf3385c2c 1066253f2c9f "
        "10bcc59c0ed4 11e2536db623 1285140dc6f7 13a50c6a97f0 15343e05d79c 16832d050d45 "
        "17f476bdecf8 1b1e7ae417b5 1c29e7ad30a8 1c819cb1b82a 20417b3eaa91 22ba5e34ea27 "
        "237af06ff69b 24ac61136b4f 254105598b8e 25ba5bb7686a 2714a3430905 2b8d0f83f72d "
        "2c2bf5bb1974 2fde7c9e7bc6 30fc59fccbbb 315fa0cbcf0d 31aaf1c6eca4 31e9a9edfe46 "
        "31fc3f0a490a 33ac6c9f2f81 34f855ac0505 351f6b145ef5 36e8c91c6fbf 37d188a48ba7 "
        "3808e04d93dc 39cc0b4cbfd9 3e261ab4bbe3 3f92e28b1c35 40ad02f29855 42734b68cfea "
        "42a9586ed64d 433b7a5cee1a 44b5d5074827 44c27b58255f 4a693d503f8a 4a8b781dc633 "
        "4be87e5998b7 4c8720b51b34 4dbd883cce61 508bac19e6bf 513db455a1d4 5385f746ccbb "
        "565c2b67f6ed 56cc53681f8f 5a34bd75fb4b 5b5b0b28a71a 5d8b4d5571a7 5e353aaa9242 "
        "5fc78cc06611 5ff19b382728 60af80d2993c 60f8f07b5de9 61879a881a5d 6503251a1ef2 "
        "66310b2fe0f7 69721c2ca597 6b47d630686b 6e0b2e687e43 70675af3a885 7102c672a2ad "
        "717dcf4ec98d 762bd036bb47 7852c90699e4 792a496c3bc3 795c3b078f80 7bcead84171a "
        "8102e90e714a 8185da80f36d 81f257bffa2b 8266da2aa4a7 86e3d0264752 891f8c0e3c72 "
        "8ab354c091e6 8b8eff34f3e4 8c46fe93214f 8d8d875de1ee 8e8a9cfc6921 8f1b4028896d "
        "90bbeb0afbc2 91a7cab44174 91ccad9fa7ba 947c9f38fddd 9490a6266792 956d02f3d5be "
        "95db38dacf96 974110ba0562 9bedb959acb0 9f208c09b672 9f8cf2cbd780 a285b4df86bb "
        "a49f583fec04 a910c4c37292 a9f80927a53b aadc48011e94 ab20a9d0d302 ab7b39e30ef8 "
        "ae0458bca6de b0702f961143 b33e21eb47e2 b36d9898c1ac b51aac6c5041 b5819aa5c462 "
        "b655e07fd0d6 b687670e5537 b7df9c02988b b896b899eac2 b91a254bcb9b bae9bcc2df44 "
        "bc4646380335 bc49c034d4d8 bcccfab45e4e bfb364a4c9aa c1b2d9eb3ec2 c34665366d8f "
        "c42bb553245f c4a4fa1ffc89 c4b3243c7d4d c54d537542d2 c5bf493a1a83 c6883f91a1cd "
        "c69e71c36f26 c984c7d78d38 c9d7ffc5676c cbeb43bf2c00 d14e9433c809 d4b30769cf19 "
        "d5249d1d9aa8 d67b73407c09 d6bc301a0f50 db28a5b266c9 dbbf9ad546af dcd417f587a1 "
        "de7a51128a3e deb35321151e e0fd9ca4a439 e27dac000b82 e342a58ece68 e3a4a86b4bb0 "
        "e67e1879cc72 e787fb5b7531 e80ac9e0b46f e8aacfa71e44 e93486db7d53 e98f853366e6 "
        "e9cabf3ad0da ea58c5748fdd eb0178a5eaf4 eb1ea309de2f eb2b9f5c9aec edec56d15a3c "
        "ee7541800be8 efd97f24245b f05d45acbe5a f4808c00c39d f5f22bffd98e f6afd781d211 "
        "f6f1fd60689a f874be922b43 f8eb0e17dd85 f994fe3c0f5f fa1ceaef46a2 fcbc1428cf95 "
        "ff481b104ce6 "
    ).split()
)


def _shingles(text: str, n: int = 6) -> set[str]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


def _official_task(item) -> str:
    return render_user_text(item, get_variant("official")).split("Plan the NEXT page", 1)[1]


def test_official_variant_exists_and_default_stays_the_default():
    official = get_variant("official")
    assert official.target_chars is None
    assert "official" in official.description
    assert PROMPT_VARIANTS["default"].rule() != official.rule()


def test_official_variant_enumerates_the_label_sets(item):
    task = _official_task(item)
    assert '"emotion": one of angry, happy, neutral, sad' in task
    assert '"speed": one of slow, normal, fast' in task
    assert '"pitch": one of low, normal, high' in task
    assert '"gender": one of female, male' in task
    assert "only from the values listed above" in task


def test_official_variant_asks_for_exactly_one_quote_inside_the_narration(item):
    narration_rule = _official_task(item).split('- "narration":', 1)[1].split('- "image_prompt"')[0]
    assert "exactly one" in narration_rule and "line of dialogue" in narration_rule
    assert "quotation marks" in narration_rule and "inside the narration" in narration_rule
    assert "no other quoted speech" in narration_rule
    # the spoken line is that quote
    utterance_rule = _official_task(item).split('"utterance":', 1)[1].split("\n")[0]
    assert "quoted line in the narration" in utterance_rule
    # brevity and coherence, but none of the default variant's length target or extra rules
    assert "brief" in narration_rule and "coherently" in narration_rule
    assert "characters" not in narration_rule.replace("character's", "")
    assert "same as before" not in _official_task(item)


def test_official_variant_uses_the_four_inputs(item):
    text = render_user_text(item, get_variant("official"))
    head = text.split("Plan the NEXT page", 1)[0]
    assert json.dumps(item["metadata"], ensure_ascii=False, indent=2) in head
    assert item["current_text"] in head
    assert json.dumps(item["conditions"], ensure_ascii=False, indent=2) in head
    assert "illustration is attached" in head
    # the conditions' parts the official rules name
    task = _official_task(item)
    for part in ("scene", "characters", "actions", "emotions", "ambient sound"):
        assert part in task


def test_official_variant_copies_no_official_wording():
    assert len(OFFICIAL_SHINGLE_DIGESTS) > 150
    text = SYSTEM_PROMPT + "\n" + render_user_text({}, get_variant("official"))
    copied = [
        s
        for s in _shingles(text)
        if hashlib.sha256(s.encode()).hexdigest()[:12] in OFFICIAL_SHINGLE_DIGESTS
    ]
    assert copied == []


def test_the_digest_check_would_catch_a_copy():
    # the checker itself works: the official user template's first two section headings (with
    # the placeholder between them) are found
    probe = "Story metadata: {metadata} Previous page text:"
    assert any(
        hashlib.sha256(s.encode()).hexdigest()[:12] in OFFICIAL_SHINGLE_DIGESTS
        for s in _shingles(probe)
    )


def test_adding_the_official_variant_left_the_other_wordings_alone():
    # cache keys of existing runs depend on these digests
    assert get_variant("default").digest() == (
        "a65a05ecb04300ba1286b0cef834b9e302a930ee4082035eb84d0e2b0293331d"
    )
    assert get_variant("paper_like").digest() == (
        "20f48a9a29beb7bbbf6202b30db2bc2c7af30c0acfb5d3e1fa1dc52e1770c54a"
    )
