"""Prompt building, answer parsing and parameter checks: pure functions, no torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from omnistory_mmada.backbone import MMaDA
from omnistory_mmada.parsing import (
    DEFAULT_SPEAKER,
    flatten_t2i,
    insert_quote,
    interpret,
    locate_json,
    speech_plan,
    strip_wrapping_quotes,
    t2i_problem,
)
from omnistory_mmada.prompts import (
    RESPONSE_KEYS,
    SYSTEM_PROMPT,
    T2I_SUFFIX,
    book_summary,
    condition_lines,
    mmu_messages,
    t2i_prompt,
    user_prompt,
)
from omnistory_mmada.source import PINNED_COMMIT, check_source_dir, git_revision, tree_digest
from omnistory_testkit import demo_examples

from omnistory_core.api import ComponentError, ConfigError

GOOD_T2I = "Storybook illustration of a fox at a window at night, soft light"


# -- prompts -----------------------------------------------------------------------------------
def test_system_prompt_asks_for_the_four_keys_and_shows_one_parseable_example():
    for key in RESPONSE_KEYS:
        assert f'"{key}"' in SYSTEM_PROMPT
    start = SYSTEM_PROMPT.index("{")
    example, _ = json.JSONDecoder().raw_decode(SYSTEM_PROMPT[start:])
    assert set(example) == set(RESPONSE_KEYS)
    # the worked example passes our own parser without any repair
    page = interpret(json.dumps(example))
    assert page.repairs == [] and page.speech["speaker"] == "Tomas"


def test_user_prompt_holds_the_book_the_page_and_the_reduced_conditions():
    ex = demo_examples(limit=1)[0]
    prompt = user_prompt(ex.metadata, ex.current.text, ex.conditions)
    lines = prompt.splitlines()
    assert lines[0] == f"Book title: {ex.metadata['topic']}"  # no title in the data: the topic
    assert lines[1] == "Book style: Fantasy"  # genre before style
    assert lines[2] == "Main characters: Lena, Pip, The Moon"
    assert ex.current.text in lines
    assert f"Scene: {ex.conditions['scene']}" in lines
    assert f"Narrative goal: {ex.conditions['text_instruction']}" in lines
    assert f"Ambient mood: {ex.conditions['ambient_sound']}" in lines
    assert (
        "Character states: Pip (urgent): taps on the window glass with his paw; "
        "Lena (surprised): turns toward the window"
    ) in lines
    # neither speech intents nor visibility nor the book characters' details reach the model
    assert "speech_intent" not in prompt and "ask her to hurry" not in prompt
    assert "visible" not in prompt and "brown bob" not in prompt
    messages = mmu_messages(ex.metadata, ex.current.text, ex.conditions)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == prompt


def test_book_summary_fallbacks_and_limits():
    many = {"characters": [{"name": f"C{i}"} for i in range(8)] + ["Plain"]}
    assert book_summary(many)[2] == "C0, C1, C2, C3, C4"
    assert book_summary({"title": "T", "topic": "X", "style": "S"})[:2] == ("T", "S")
    assert book_summary({"theme": "Th"})[1] == "Th"
    assert book_summary(None) == ("(untitled)", "children's picture book", "(none given)")
    assert book_summary({"characters": ["Ann", {"sex": "f"}, "Bo"]})[2] == "Ann, Bo"


def test_condition_lines_keep_three_characters_and_skip_empty_parts():
    conditions = {
        "scene": "",
        "text_instruction": "Go home.",
        "ambient_sound": None,
        "characters": [
            {"name": "A", "emotion": "calm"},
            {"name": "B", "action": "waves"},
            "not a character",
            {"name": "C", "emotion": "sad", "action": "sits"},
            {"name": "D", "emotion": "glad", "action": "runs"},
        ],
    }
    assert condition_lines(conditions) == [
        "Narrative goal: Go home.",
        "Character states: A (calm); B: waves",  # the 3rd entry is not an object; D is the 5th
    ]
    assert condition_lines({}) == []
    assert "Carry the story on from the current page." in user_prompt({}, "x", {})


def test_t2i_prompt_is_one_line_with_a_full_stop_and_the_official_suffix():
    assert t2i_prompt("  a fox\n at  night ") == "a fox at night." + T2I_SUFFIX
    assert t2i_prompt("a fox.") == "a fox." + T2I_SUFFIX
    assert T2I_SUFFIX == ", masterpiece, children's storybook illustration, best quality"


# -- parsing -----------------------------------------------------------------------------------
def page(**fields) -> dict:
    base = {"text": 'Pip ran. "Hurry!" he said.', "quote": "Hurry!", "t2i": GOOD_T2I}
    return {**base, **fields}


def test_locate_json_tries_whole_fenced_braces_then_salvages_keys():
    obj = page()
    assert locate_json(json.dumps(obj)) == (obj, "json")
    assert locate_json("Sure:\n```json\n" + json.dumps(obj) + "\n```") == (obj, "fenced")
    assert locate_json("Answer: " + json.dumps(obj) + " Hope it helps!") == (obj, "braces")
    broken = (
        '{"text": "Pip ran.\\nHe stopped.", "quote": "Hurry!" "t2i": "a fox, warm light",'
        ' "speech_metadata": {"speaker": {"name": "Pip", "emotion": "happy"}}, "x": }'
    )
    found, how = locate_json(broken)
    assert how == "salvaged"
    assert found == {
        "text": "Pip ran.\nHe stopped.",
        "quote": "Hurry!",
        "t2i": "a fox, warm light",
        "speech_metadata": {"speaker": {"name": "Pip", "emotion": "happy"}},
    }
    with pytest.raises(ComponentError) as info:
        locate_json("I cannot see the picture.")
    assert info.value.category == "plan_json_error"


@pytest.mark.parametrize(
    ("fields", "category"),
    [
        ({"text": ""}, "plan_missing_field"),
        ({"text": None}, "plan_missing_field"),
        ({"quote": ""}, "plan_missing_field"),
        ({"quote": '""'}, "plan_missing_field"),
        ({"t2i": "a fox"}, "unusable_image_prompt"),
    ],
)
def test_missing_fields_lose_the_example(fields, category):
    with pytest.raises(ComponentError) as info:
        interpret(json.dumps(page(**fields)))
    assert info.value.category == category


def test_a_truncated_answer_is_salvaged_key_by_key_but_needs_its_quote():
    answer = json.dumps(page())[:52]  # ends inside the quote
    assert answer.startswith('{"text": "Pip ran.')
    with pytest.raises(ComponentError, match="no quote") as info:
        interpret(answer)
    assert info.value.category == "plan_missing_field"


def test_the_quote_may_come_from_the_speech_metadata_line():
    obj = page(quote=None, speech_metadata={"speaker": {"name": "Pip", "line": "'Hurry!'"}})
    result = interpret(json.dumps(obj))
    assert result.quote == "Hurry!" and result.speech["utterance"] == "Hurry!"
    assert "quote taken from speech_metadata.speaker.line" in result.repairs


@pytest.mark.parametrize(
    ("prompt", "problem"),
    [
        ("", "empty"),
        ("none", "a placeholder"),
        ("a fox at night", "fewer than 6 words"),
        ('"Come quick," said the fox in the garden', "starts with a quote mark"),
        ("\u201cCome quick\u201d said the fox in the garden", "starts with a quote mark"),
        ("Oh dear, the moon fell into the forest", "reads like speech"),
        ("I am the moon and I fell in the garden", "reads like speech"),
        ("She said the forest was dark and cold", "reads like speech"),
        ("A fox {in} a garden at night, warm light", "contains braces or brackets"),
        ("fox + girl + moon in a garden scene", "looks like schema or code"),
        ("A fox and a girl walk along the road at night", "names nothing visual"),
        (GOOD_T2I, None),
        ("A girl in a purple dress in her ROOM at night", None),  # case-insensitive keywords
    ],
)
def test_t2i_usability(prompt, problem):
    assert t2i_problem(prompt) == problem


def test_t2i_equal_to_the_quote_is_unusable():
    line = "the moon is lost in the forest tonight"
    assert t2i_problem(line, quote=line.upper()) == "the quote itself"


def test_t2i_values_are_flattened_to_one_line():
    assert flatten_t2i("a\n fox  ") == "a fox"
    assert flatten_t2i(["a fox", " ", "at night"]) == "a fox at night"
    assert flatten_t2i({"image": {"name": "Pip", "scene": "garden", "x": "y"}}) == "Pip, garden"
    assert flatten_t2i({"who": "Pip", "where": {"place": "garden", "n": [1]}}) == (
        "who: Pip; where: place: garden"
    )
    assert flatten_t2i(None) == "" and flatten_t2i(7) == "7"


def test_quote_insertion():
    assert insert_quote('He said "Hurry!" loudly.', "Hurry!") == ('He said "Hurry!" loudly.', False)
    assert insert_quote('He said "Go on" loudly.', "Hurry!") == ('He said "Hurry!" loudly.', True)
    assert insert_quote("He said \u201cGo\u201d.", "Hurry!") == ('He said "Hurry!".', True)
    assert insert_quote("Pip ran home!", "Hurry!") == ('Pip ran home! "Hurry!"', True)
    assert insert_quote("Pip ran home", "Hurry!") == ('Pip ran home. "Hurry!"', True)
    # an apostrophe inside a word is not a quoted span
    assert insert_quote("Pip's tail and Lena's hat", "Hi") == (
        "Pip's tail and Lena's hat. \"Hi\"",
        True,
    )
    assert strip_wrapping_quotes(" \u2018Hi\u2019 ") == "Hi"
    assert strip_wrapping_quotes('"Hi') == '"Hi'


def test_speech_labels_outside_the_sets_become_the_official_defaults():
    plan, repairs = speech_plan(
        {"speaker": {"name": "Pip", "emotion": "Happy", "speed": "fast", "gender": "boy"}}, "Go!"
    )
    assert plan == {
        "utterance": "Go!",
        "speaker": "Pip",
        "emotion": "neutral",  # exact match only, as the official runner
        "speed": "fast",
        "pitch": "normal",
        "gender": "female",
    }
    assert len(repairs) == 3
    defaults, _ = speech_plan("not json", "Go!")
    assert defaults == {"utterance": "Go!", **DEFAULT_SPEAKER}
    flat, _ = speech_plan({"name": "Pip", "emotion": "sad"}, "Go!")  # no "speaker" object
    assert flat["speaker"] == "Narrator" and flat["emotion"] == "neutral"
    as_text, _ = speech_plan(json.dumps({"speaker": {"name": "Ann", "pitch": "low"}}), "Go!")
    assert as_text["speaker"] == "Ann" and as_text["pitch"] == "low"


def test_the_spoken_line_is_always_the_quote():
    obj = page(speech_metadata={"speaker": {"name": "Pip", "line": "Something else"}})
    assert interpret(json.dumps(obj)).speech["utterance"] == "Hurry!"


# -- parameters and the checkout ---------------------------------------------------------------
def test_source_dir_is_required_and_checked(tmp_path):
    for value in (None, "", str(tmp_path / "nowhere")):
        with pytest.raises(ConfigError) as info:
            MMaDA(source_dir=value, seed=0)
        message = str(info.value)
        assert "\n" not in message and "backbone.source_dir" in message
        assert f"git -C MMaDA checkout {PINNED_COMMIT}" in message
        assert "git clone https://github.com/Gen-Verse/MMaDA" in message
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    with pytest.raises(ConfigError, match="not a checkout of Gen-Verse/MMaDA .*training/utils.py"):
        MMaDA(source_dir=str(tmp_path), seed=0)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"steps": 3}, "unknown parameter(s) steps; known: "),
        ({"mmu_block_length": 100}, "mmu_max_new_tokens (512) must be a multiple of"),
        ({"mmu_steps": 250}, "mmu_steps (250) must be a multiple of the number of blocks (4"),
        ({"t2i_guidance_scale": -1}, "t2i_guidance_scale must be >= 0, got -1"),
        ({"t2i_timesteps": 0}, "t2i_timesteps must be >= 1, got 0"),
        ({"t2i_mask_schedule": "square"}, "t2i_mask_schedule must be cosine, linear"),
        ({"dtype": "int8"}, "dtype must be one of"),
        ({"model": ""}, "model must be a hub id or a local path"),
        ({"seed": "x"}, "seed must be an integer"),
    ],
)
def test_bad_parameters_are_one_line_config_errors(source_tree, params, message):
    with pytest.raises(ConfigError) as info:
        MMaDA(source_dir=str(source_tree), **{"seed": 0, **params})
    assert message in str(info.value) and str(info.value).startswith("backbone=mmada: ")


def test_cache_key_has_the_code_not_the_path(source_tree, tmp_path):
    import shutil

    copy = shutil.copytree(source_tree, tmp_path / "elsewhere")
    a = MMaDA(source_dir=str(source_tree), seed=0, device="cpu")
    b = MMaDA(source_dir=str(copy), seed=0, device="cuda")
    assert a.output_params() == b.output_params()
    assert "source_dir" not in a.output_params() and "device" not in a.output_params()
    defaults = {k: v for k, v in MMaDA.defaults.items() if k not in ("source_dir", "device")}
    assert a.output_params() == {**defaults, "seed": 0, "source_tree": tree_digest(source_tree)}
    # what runs, not how it was spelled
    explicit = MMaDA(source_dir=str(source_tree), seed=0, dtype="bf16", mmu_steps=256)
    assert explicit.output_params() == {**a.output_params(), "dtype": "bfloat16"}
    (copy / "models" / "sampling.py").write_text("# changed\n", encoding="utf-8")
    assert MMaDA(source_dir=str(copy), seed=0).output_params() != a.output_params()
    assert MMaDA(source_dir=str(source_tree), seed=0, t2i_guidance_scale=3.5).output_params() != (
        a.output_params()
    )


def test_git_revision_reads_a_detached_head_and_refs(tmp_path):
    git = tmp_path / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("3cdb870aaaa\n")
    assert git_revision(tmp_path) == "3cdb870aaaa"
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "packed-refs").write_text("# pack-refs\nabc123 refs/heads/main\n")
    assert git_revision(tmp_path) == "abc123"
    (git / "refs" / "heads" / "main").write_text("def456\n")
    assert git_revision(tmp_path) == "def456"
    assert git_revision(tmp_path / "missing") is None


def test_shipped_config_defaults_match_the_class(source_tree, monkeypatch):
    from omegaconf import OmegaConf

    for var in ("SOURCE_BACKBONE_MMADA", "MODEL_BACKBONE_MMADA", "MODEL_BACKBONE_MMADA_VQ"):
        monkeypatch.delenv(f"OMNISTORY_{var}", raising=False)

    from omnistory_testkit import installed_registry

    registry = installed_registry()
    assert registry.component("backbone", "mmada") is MMaDA
    import omnistory_mmada

    path = omnistory_mmada.__path__[0] + "/conf/backbone/mmada.yaml"
    node = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    assert node.pop("name") == "mmada"
    # only the environment variables: unset, they give the declared defaults
    assert node == {k: MMaDA.defaults[k] for k in ("source_dir", "model", "vq_model")}
    assert check_source_dir(str(source_tree)) == source_tree.resolve()


def test_importing_the_plugin_imports_no_torch():
    code = (
        "import sys, omnistory_mmada.plugin, omnistory_mmada.backbone;"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
