"""StoryDiffusion's prompts as ViStoryBench's adapter and the app build them (pure), and the long
prompt chunking."""

from __future__ import annotations

from omnistory_storydiffusion.long_prompt import CHUNK, chunks, parse_emphasis
from omnistory_storydiffusion.prompts import general_prompt, plan_story, shot_line


def test_shot_lines_and_the_apps_reading_of_a_story() -> None:
    lines = [
        shot_line("Long shot", "Dawn.", "A rocket.", "A pad", []),
        shot_line("Close-up", "Ann waits.", "Ann smiles.", "A room", ["Ann"]),
        shot_line("Wide", "Both go.", "They walk.", "A road", ["Ann", "Bo"]),
        shot_line("Mid", "Bo sits.", "Bo reads.", "A bench", ["Bo"]),
        shot_line("Mid", "Cy and Ann.", "They talk.", "A hall", ["Cy", "Ann"]),
    ]
    assert lines[0] == "Long shot; Dawn.; A rocket.; [NC]; A pad."
    assert (
        lines[2] == "Wide; Both go.; They walk.; Ann and Bo, Ann is [Ann] and Bo is [Bo]; A road."
    )
    general = general_prompt([("Ann", "a girl in red"), ("Bo", "a grey dog"), ("Cy", "a cat")])
    plan = plan_story(general, lines)
    assert plan.id_shots == {"[Ann]": 1, "[Bo]": 3}
    assert plan.without_id == ("[Cy]",)  # never alone: the app would stop the story
    assert plan.order == (1, 3, 0, 2, 4)  # ID shots first, then story order
    assert plan.present[2] == ("[Ann]", "[Bo]") and plan.present[0] == ()
    assert plan.prompts[0] == "Long shot; Dawn.; A rocket.; ; A pad."
    assert "Ann is  a girl in red  and Bo is  a grey dog " in plan.prompts[2]


def test_emphasis_and_chunks_without_the_77_token_limit() -> None:
    assert parse_emphasis("a (red) [dim] (big:1.5) \\(x\\)") == [
        ("a ", 1.0),
        ("red", 1.1),
        (" ", 1.0),
        ("dim", 1 / 1.1),
        (" ", 1.0),
        ("big", 1.5),
        (" (x)", 1.0),
    ]
    ids = list(range(10, 10 + CHUNK + 5))
    out = chunks(ids, [1.0] * len(ids), bos=0, eos=1)
    assert [len(c) for c, _ in out] == [77, 77]
    assert out[0][0][0] == 0 and out[0][0][-1] == 1 and out[1][0][1:6] == ids[CHUNK:]
    assert out[1][0][6:] == [1] * 71
