"""CharaConsist through the expert's real calling code against the stand-in checkout
(characonsist_standin.py, drawing with diffusers' FluxPipeline on tiny random weights): the
script's prompts, the ID shot first, pre-run and final run with the state carried over, and a
failed ID shot stopping the story."""

from __future__ import annotations

import pytest
from omnistory_characonsist.expert import CharaConsist
from omnistory_characonsist.story import drawing_order, primary_character, segments
from PIL import Image

from omnistory_core.api import Failure

CAST = [
    {"key": "Ann", "description": "a girl in a red coat"},
    {"key": "Bo", "description": "a grey dog"},
]


def shot(index: int, keys: list[str], script: str, camera: str = "Mid shot") -> dict:
    fields = {"plot": f"Part {index}.", "scene": "A park", "script": script, "camera": camera}
    return {"shot": {**fields, "index": index, "character_keys": keys}, "characters": CAST}


def test_the_scripts_prompts_and_order() -> None:
    onstage = [[], ["Bo"], ["Ann", "Bo"], ["Ann"]]
    assert primary_character(onstage, ["Ann", "Bo"]) == "Ann"  # 2 each: alphabetical
    assert primary_character([[], []], ["Bo", "Ann"]) == "Bo"  # nobody onstage: the cast's first
    assert drawing_order(onstage, "Ann") == [2, 0, 1, 3]
    seg = segments({"scene": "", "plot": "Dawn.", "script": "Rocket. ", "camera": " Wide "}, "fg")
    assert seg.prompt == "Dawn. fg Rocket. perspective: Wide" and seg.background == "Dawn. "


@pytest.fixture(scope="module")
def characonsist(characonsist_source, tiny_flux_dev):
    expert = CharaConsist(
        source_dir=str(characonsist_source),
        model=str(tiny_flux_dev),
        seed=0,
        height=64,
        width=64,
        steps=2,
    )
    expert.load()
    return expert


def test_id_shot_first_then_pre_run_and_final_run(characonsist) -> None:
    story = {"items": [shot(1, [], "Empty park."), shot(2, ["Ann"], "Ann waves."),
                       shot(3, ["Bo"], "Bo runs.", camera="")]}  # fmt: skip
    characonsist.pipe.calls = []
    outputs = characonsist.run_one(story)
    assert all(isinstance(o, Image.Image) and o.size == (64, 64) for o in outputs)
    calls = characonsist.pipe.calls
    flags = [(c["prompt"].split(" a girl")[0], c["is_id"], c["is_pre_run"]) for c in calls[:-1]]
    assert flags == [
        ("A park", True, False),  # shot 2 holds the primary character: the ID shot
        ("A park", False, True),
        ("A park", False, False),
        ("A park", False, True),
        ("A park", False, False),
    ]
    assert calls[0]["prompt"] == "A park a girl in a red coat Ann waves. perspective: Mid shot"
    assert all(c["had_id_state"] for c in calls[1:-1]) and calls[-1] == {"reset_id_bank": True}
    # tokenizer_2's count at its 512-token padding, less the end token
    tokenizer = characonsist.pipe.tokenizer_2

    def tokens(text: str) -> int:
        return sum(tokenizer(text, padding="max_length", max_length=512).attention_mask) - 1

    assert calls[0]["text_len"] == (tokens("A park "), tokens(calls[0]["prompt"]))
    assert 0 < calls[0]["text_len"][0] < calls[0]["text_len"][1]
    assert {(c["use_interpolate"], c["share_bg"], c["size"]) for c in calls[:-1]} == {
        (False, False, (4, 4))
    }


def test_a_failed_id_shot_stops_the_story(characonsist) -> None:
    story = {"items": [shot(1, ["Ann"], "Ann."), shot(2, ["Ann"], "Again.")]}
    original = characonsist.params["height"]
    characonsist.params["height"] = 8  # the pipeline refuses a size off its 16-pixel grid
    try:
        first, second = characonsist.run_one(story)
    finally:
        characonsist.params["height"] = original
    assert isinstance(first, Failure) and first.category == "model_error"
    assert isinstance(second, Failure) and second.category == "upstream_failed"
