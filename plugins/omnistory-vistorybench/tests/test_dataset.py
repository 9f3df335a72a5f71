"""The ViStory loader on the bundled fixture and on broken copies of it."""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import sys
from pathlib import Path

import pytest
from omnistory_vistorybench.dataset import (
    LITE_STORY_IDS,
    dataset_fingerprint,
    fixture_root,
    load_records,
    load_stories,
    resolve_dataset_dir,
    shot_records,
    story_ids,
    story_prompt_merge,
)

from omnistory_core.api import DatasetError

FIXTURE = fixture_root()
VISTORY = FIXTURE / "ViStory"

EILEEN = (
    "A woman astronaut in her thirties with short light-brown hair and a warm smile,"
    " wearing an orange flight suit with mission patches."
)
CHELSEA = "A tabby cat with grey and brown striped fur, white whiskers and pale green eyes."


@pytest.fixture
def vistory_copy(tmp_path: Path) -> Path:
    """A writable copy of the fixture's ViStory folder."""
    target = tmp_path / "data" / "ViStory"
    shutil.copytree(VISTORY, target)
    return target


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_full_split_loads_both_stories_in_file_order() -> None:
    stories = load_stories(FIXTURE)
    assert [s.id for s in stories] == ["01", "02"]
    first, second = stories
    assert first.type == first.story_type == "Children's Picture Books"
    assert first.language == "en"
    assert [shot.index for shot in first.shots] == [1, 2, 3, 4, 5, 7]
    assert [len(shot.character_keys) for shot in first.shots] == [0, 1, 2, 3, 1, 1]
    assert [shot.index for shot in second.shots] == [1, 2, 3]
    assert second.story_type == "Fable"


def test_characters_carry_tags_counts_and_sorted_references() -> None:
    first, second = load_stories(FIXTURE)
    tags = {c.tag for story in (first, second) for c in story.characters.values()}
    assert tags == {"realistic_human", "unrealistic_human", "non_human"}
    eileen = first.characters["Eileen"]
    assert (eileen.key, eileen.name, eileen.name_en) == ("Eileen", "Eileen", "Eileen")
    assert eileen.prompt == EILEEN
    assert eileen.num_of_appearances == 4
    assert [p.relative_to(VISTORY).as_posix() for p in eileen.images] == [
        "01/image/Eileen/00.jpg",
        "01/image/Eileen/01.jpg",
    ]
    bo = second.characters["Captain Bo"]
    assert bo.tag == "unrealistic_human"
    assert [p.name for p in bo.images] == ["00.jpg", "01.jpg"]
    assert second.characters["Dapple"].num_of_appearances == -1


def test_lite_split_keeps_only_the_official_ids() -> None:
    assert len(LITE_STORY_IDS) == 20
    assert story_ids(FIXTURE, "full") == ["01", "02"]
    assert story_ids(FIXTURE, "lite") == ["01"]
    assert [s.id for s in load_stories(FIXTURE, split="lite")] == ["01"]


def test_root_may_be_the_vistory_folder_itself() -> None:
    assert resolve_dataset_dir(FIXTURE) == VISTORY
    assert resolve_dataset_dir(VISTORY) == VISTORY
    assert [s.id for s in load_stories(VISTORY)] == ["01", "02"]


def test_a_folder_without_stories_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no ViStory dataset"):
        load_stories(tmp_path)


def test_stories_option_narrows_the_split() -> None:
    assert [s.id for s in load_stories(FIXTURE, stories=["02"])] == ["02"]
    assert [s.id for s in load_stories(FIXTURE, stories=[2, 1])] == ["01", "02"]
    with pytest.raises(DatasetError, match=r"\['02'\] are not in the lite split"):
        load_stories(FIXTURE, split="lite", stories=["02"])


@pytest.mark.parametrize(("option", "value"), [("split", "medium"), ("language", "fr")])
def test_unknown_split_or_language_is_refused(option: str, value: str) -> None:
    with pytest.raises(DatasetError, match=f"{option} '{value}'"):
        load_stories(FIXTURE, **{option: value})


def test_chinese_text_and_names(caplog: pytest.LogCaptureFixture) -> None:
    first, second = load_stories(FIXTURE, language="ch")
    assert (first.type, second.type) == ("儿童绘本", "寓言")
    assert first.characters["Eileen"].name == "艾琳"
    shot = first.shot(3)
    assert shot.character_keys == ("Eileen", "Chelsea")
    assert shot.character_names == ("艾琳", "切尔西")
    assert shot.plot == "小猫切尔西来道别。"


def test_missing_language_gives_the_official_placeholder(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="omnistory"):
        first = load_stories(FIXTURE, language="ch", stories=["01"])[0]
    shot = first.shot(5)
    assert shot.plot == (
        "(ch data missing) {'en': 'Chelsea waits at the window while the rocket climbs.'}"
    )
    assert shot.camera == "(ch data missing) {'en': 'Close-up, from behind the cat'}"
    # names come from the character library, not from the placeholder's letters
    assert shot.character_keys == ("Chelsea",)
    assert shot.character_names == ("切尔西",)
    lines = [m for m in warnings_of(caplog) if "shot 5" in m]
    assert len(lines) == 1
    assert "story 01" in lines[0] and "Plot Correspondence" in lines[0] and "'ch'" in lines[0]
    # English is complete, so the same shot loads without a placeholder or a warning
    english = load_stories(FIXTURE, stories=["01"])[0].shot(5)
    assert english.plot == "Chelsea waits at the window while the rocket climbs."


def test_a_shot_missing_a_field_is_dropped_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="omnistory"):
        first = load_stories(FIXTURE, stories=["01"])[0]
    assert 6 not in [shot.index for shot in first.shots]
    with pytest.raises(KeyError):
        first.shot(6)
    lines = [m for m in warnings_of(caplog) if "shot 6" in m]
    assert len(lines) == 1
    assert "story 01" in lines[0]
    assert "Shot Perspective Design" in lines[0]
    assert "\n" not in lines[0]


def test_an_undefined_character_key_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="omnistory"):
        first = load_stories(FIXTURE, language="ch", stories=["01"])[0]
    shot = first.shot(7)
    assert shot.character_keys == ("Eileen",)
    assert shot.character_names == ("艾琳",)
    assert shot.undefined_keys == ("Flight Director",)
    lines = [m for m in warnings_of(caplog) if "Flight Director" in m]
    assert len(lines) == 1
    assert "story 01" in lines[0] and "shot 7" in lines[0]


def test_story_json_with_a_byte_order_mark_loads() -> None:
    assert (VISTORY / "02" / "story.json").read_bytes().startswith(b"\xef\xbb\xbf")
    assert load_stories(FIXTURE, stories=["02"])[0].characters["Dapple"].name == "Dapple"


def test_malformed_json_names_the_file(vistory_copy: Path) -> None:
    broken = vistory_copy / "02" / "story.json"
    broken.write_bytes(broken.read_bytes()[:200])
    with pytest.raises(DatasetError) as caught:
        load_stories(vistory_copy)
    assert str(broken) in str(caught.value)
    assert "invalid JSON" in str(caught.value)
    assert caught.value.problems[0].file == str(broken)


def test_undecodable_story_json_names_the_file(vistory_copy: Path) -> None:
    broken = vistory_copy / "01" / "story.json"
    broken.write_bytes(b'{"Shots": "\xff\xfe"}')
    with pytest.raises(DatasetError, match="not UTF-8") as caught:
        load_stories(vistory_copy)
    assert str(broken) in str(caught.value)


def test_a_story_folder_without_story_json_names_the_file(vistory_copy: Path) -> None:
    (vistory_copy / "03").mkdir()
    with pytest.raises(DatasetError) as caught:
        load_stories(vistory_copy)
    assert str(vistory_copy / "03" / "story.json") in str(caught.value)


def test_wrong_structure_names_the_file_and_the_field(vistory_copy: Path) -> None:
    path = vistory_copy / "01" / "story.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["Shots"][1]["index"] = "two"
    data["Shots"][2]["Plot Correspondence"] = "not an object"
    data["Characters"]["Pip"]["num_of_appearances"] = "2"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        load_stories(vistory_copy)
    fields = {p.field for p in caught.value.problems}
    assert fields == {
        "Shots[1].index",
        "Shots[2].Plot Correspondence",
        "Characters.Pip.num_of_appearances",
    }
    assert all(p.file == str(path) for p in caught.value.problems)
    assert str(path) in str(caught.value)


def test_prompt_merge_on_a_known_shot() -> None:
    first = load_stories(FIXTURE, stories=["01"])[0]
    prompt, images = story_prompt_merge(first.shot(3), first)
    assert prompt == (
        "Medium shot, eye level;"
        "Chelsea the cat comes to say goodbye.;"
        "Eileen sits at the table while Chelsea rests beside her cup, looking up at her.;"
        f"Eileen is {EILEEN};Chelsea is {CHELSEA};"
        "A cafe table by the window, a cup of coffee, morning light;"
    )
    assert images == (
        VISTORY / "01" / "image" / "Eileen" / "00.jpg",
        VISTORY / "01" / "image" / "Chelsea" / "00.jpg",
    )


def test_prompt_merge_without_characters_leaves_an_empty_slot() -> None:
    first = load_stories(FIXTURE, stories=["01"])[0]
    merged = story_prompt_merge(first.shot(1), first)
    assert merged.prompt == (
        "Long shot, low angle;At dawn the rocket waits on the launch pad.;"
        "A tall white rocket stands on the launch pad under a pale morning sky;"
        " nobody is in view.;;"
        "A launch site at dawn, a tall white rocket on the pad, a clear pale sky;"
    )
    assert merged.images == ()


def test_prompt_merge_in_chinese_keeps_the_official_is() -> None:
    first = load_stories(FIXTURE, language="ch", stories=["01"])[0]
    prompt, _ = story_prompt_merge(first.shot(2), first)
    assert prompt == (
        "中近景，平视镜头;艾琳为飞行做准备。;艾琳穿着橙色飞行服站着，对着镜头微笑。;"
        "艾琳 is 一位三十多岁的女宇航员，浅棕色短发，笑容温暖，身穿带任务徽章的橙色飞行服。;"
        "明亮的准备室，墙上挂着旗帜;"
    )


def test_a_character_without_references_gives_no_image(
    vistory_copy: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.rmtree(vistory_copy / "01" / "image" / "Pip")
    with caplog.at_level(logging.WARNING, logger="omnistory"):
        first = load_stories(vistory_copy, stories=["01"])[0]
        prompt, images = story_prompt_merge(first.shot(4), first)
    assert first.characters["Pip"].images == ()
    assert "Pip is A cartoon boy" in prompt
    assert [p.parent.name for p in images] == ["Eileen", "Chelsea"]
    assert any("'Pip' has no reference image" in m for m in warnings_of(caplog))


def test_shot_records_are_flat_and_in_canonical_order() -> None:
    stories = load_stories(FIXTURE)
    records = shot_records(stories)
    assert [r.id for r in records] == [
        "01_01", "01_02", "01_03", "01_04", "01_05", "01_07", "02_01", "02_02", "02_03",
    ]  # fmt: skip
    assert [r.index for r in records] == list(range(9))
    assert {r.group for r in records} == {"01", "02"}
    record = records[2]
    assert (record.group, record.shot_index) == ("01", 3)
    assert (record.prompt, record.reference_images) == story_prompt_merge(
        stories[0].shot(3), stories[0]
    )
    assert records[5].character_keys == ("Eileen",)


def test_load_records_reads_a_dataset_config() -> None:
    spec = {"name": "vistorybench", "root": str(FIXTURE), "split": "lite", "language": "ch"}
    records = load_records(spec)
    assert [r.id for r in records] == ["01_01", "01_02", "01_03", "01_04", "01_05", "01_07"]
    assert records[0].language == "ch"
    with pytest.raises(DatasetError, match="dataset.root"):
        load_records({"split": "full"})


def test_fingerprint_is_stable_and_independent_of_place_and_language(
    vistory_copy: Path,
) -> None:
    original = dataset_fingerprint(load_stories(FIXTURE))
    assert len(original) == 64
    assert dataset_fingerprint(load_stories(FIXTURE)) == original
    assert dataset_fingerprint(reversed(load_stories(FIXTURE))) == original
    assert dataset_fingerprint(load_stories(FIXTURE, language="ch")) == original
    assert dataset_fingerprint(load_stories(vistory_copy)) == original
    assert dataset_fingerprint(load_stories(FIXTURE, split="lite")) != original


def test_fingerprint_changes_when_one_byte_changes(vistory_copy: Path) -> None:
    original = dataset_fingerprint(load_stories(vistory_copy))
    image = vistory_copy / "02" / "image" / "Dapple" / "00.jpg"
    data = bytearray(image.read_bytes())
    data[-3] ^= 0x01
    image.write_bytes(bytes(data))
    after_image = dataset_fingerprint(load_stories(vistory_copy))
    assert after_image != original
    story = vistory_copy / "01" / "story.json"
    story.write_bytes(story.read_bytes() + b" ")
    assert dataset_fingerprint(load_stories(vistory_copy)) not in (original, after_image)


def test_fixture_script_is_deterministic_and_matches_the_committed_texts(tmp_path: Path) -> None:
    pytest.importorskip("skimage")
    script = Path(__file__).resolve().parents[3] / "tools" / "make_vistory_fixture.py"
    spec = importlib.util.spec_from_file_location("make_vistory_fixture", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    first, second = tmp_path / "a", tmp_path / "b"
    module.build(first)
    module.build(second)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)
    # image bytes depend on the Pillow build, texts do not
    for name in ("ViStory/01/story.json", "ViStory/02/story.json", "README.md", "LICENSE.md"):
        assert (first / name).read_bytes() == (FIXTURE / name).read_bytes(), name
    committed = sorted(p.relative_to(FIXTURE) for p in FIXTURE.rglob("*") if p.is_file())
    assert files == committed
