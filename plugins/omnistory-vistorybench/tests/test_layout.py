"""The official method-output layouts: writing layout A, reading A and B (fixture and tmp trees)."""

from __future__ import annotations

import io
import logging
from datetime import datetime
from pathlib import Path

import pytest
from omnistory_vistorybench.dataset import fixture_root
from omnistory_vistorybench.layout import (
    LayoutError,
    RunKey,
    detect_layout,
    format_timestamp,
    read_outputs,
    read_story_dir,
    shot_index_of,
    shot_path,
    write_shot,
)
from PIL import Image

OUTPUTS = fixture_root() / "outputs"
RUN_A = RunKey("copy_paste", "base", "en", "20250101_120000")
RUN_B = RunKey("storyboard", "base", "ch", "20250102_090000")


def png(colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def touch_image(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png((1, 2, 3)))
    return path


def test_shot_path_is_layout_a() -> None:
    path = shot_path("/out", "uno", "base", "en", "20250101_120000", "01", 3)
    assert path == Path("/out/uno/base/en/20250101_120000/01/shots/shot_03.png")
    assert shot_path("/out", "uno", "base", "ch", "20250101_120000", "12", 10).name == "shot_10.png"
    assert format_timestamp(datetime(2025, 1, 2, 3, 4, 5)) == "20250102_030405"


def test_write_shot_then_read_it_back(tmp_path: Path) -> None:
    out = tmp_path / "outputs"
    first = png((255, 0, 0))
    source = tmp_path / "drawn.jpg"
    Image.new("RGB", (8, 8), (0, 0, 255)).save(source, format="JPEG")
    written = [
        write_shot(out, "mine", "base", "en", "20250101_120000", "01", 1, first),
        write_shot(out, "mine", "base", "en", "20250101_120000", "01", 2, source),
        write_shot(out, "mine", "base", "en", "20250101_120000", "02", 1, first),
    ]
    assert written[0] == out / "mine/base/en/20250101_120000/01/shots/shot_01.png"
    assert written[0].read_bytes() == first
    # a JPEG source is stored as PNG bytes under the .png name
    assert written[1].read_bytes().startswith(b"\x89PNG")
    # nothing but the shots is left in the folder (the temporary file was renamed)
    assert sorted(p.name for p in written[0].parent.iterdir()) == ["shot_01.png", "shot_02.png"]
    runs = read_outputs(out)
    key = RunKey("mine", "base", "en", "20250101_120000")
    assert list(runs) == [key]
    run = runs[key]
    assert run.layout == "A"
    assert run.path == out / "mine/base/en/20250101_120000"
    assert sorted(run.stories) == ["01", "02"]
    assert run.stories["01"].shots == {1: written[0], 2: written[1]}
    assert run.stories["01"].chars == {}
    assert run.stories["02"].shots == {1: written[2]}


def test_write_shot_replaces_an_existing_shot(tmp_path: Path) -> None:
    args = (tmp_path, "mine", "base", "en", "20250101_120000", "01", 1)
    write_shot(*args, png((0, 0, 0)))
    path = write_shot(*args, png((9, 9, 9)))
    assert path.read_bytes() == png((9, 9, 9))


@pytest.mark.parametrize(
    ("method", "language", "timestamp", "story", "index", "message"),
    [
        ("m", "fr", "20250101_120000", "01", 1, "language"),
        ("m", "en", "2025-01-01", "01", 1, "timestamp"),
        ("m", "en", "20250101-120000", "01", 1, "timestamp"),
        ("../m", "en", "20250101_120000", "01", 1, "method"),
        ("m", "en", "20250101_120000", "one", 1, "story id"),
        ("m", "en", "20250101_120000", "01", -1, "shot index"),
    ],
)
def test_write_shot_refuses_values_outside_the_layout(
    tmp_path: Path,
    method: str,
    language: str,
    timestamp: str,
    story: str,
    index: int,
    message: str,
) -> None:
    with pytest.raises(LayoutError, match=message):
        write_shot(tmp_path, method, "base", language, timestamp, story, index, png((0, 0, 0)))
    assert list(tmp_path.iterdir()) == []


def test_write_shot_refuses_bytes_that_are_not_png(tmp_path: Path) -> None:
    with pytest.raises(LayoutError, match="not a PNG"):
        write_shot(tmp_path, "m", "base", "en", "20250101_120000", "01", 1, b"GIF89a")
    assert list(tmp_path.iterdir()) == []


def test_fixture_has_one_run_per_layout() -> None:
    runs = read_outputs(OUTPUTS)
    assert sorted(runs) == [RUN_A, RUN_B]
    assert runs[RUN_A].layout == "A"
    assert runs[RUN_B].layout == "B"
    assert detect_layout(OUTPUTS / "copy_paste") == "A"
    assert detect_layout(OUTPUTS / "storyboard") == "B"


def test_fixture_layout_a_missing_shot_and_chars_folder() -> None:
    story = read_outputs(OUTPUTS, methods=["copy_paste"])[RUN_A].stories["01"]
    assert sorted(story.shots) == [1, 3, 4, 5, 7]
    assert 2 not in story.shots
    assert all(p.parent.name == "shots" for p in story.shots.values())
    assert story.shots[4].name == "shot_04.png"
    assert sorted(story.chars) == ["Chelsea", "Eileen", "Pip"]
    assert story.chars["Eileen"].parent.name == "chars"


def test_fixture_layout_b_reads_images_in_the_story_folder() -> None:
    run = read_outputs(OUTPUTS, methods=["storyboard"])[RUN_B]
    story = run.stories["01"]
    assert sorted(story.shots) == [1, 2, 3, 4, 5, 7]
    assert story.shots[2].name == "shot_02.jpg"
    assert story.shots[1].parent == run.path / "01"
    assert story.chars == {}
    assert sorted(run.stories["02"].shots) == [1, 2, 3]


def test_fixture_timestamped_story_subfolders() -> None:
    story_dir = OUTPUTS / "copy_paste/base/en/20250101_120000/02"
    merged = read_story_dir(story_dir)
    assert {i: p.parent.parent.name for i, p in merged.shots.items()} == {
        1: "20250101_120500",
        2: "20250101_115900",
        3: "20250101_120500",
    }
    newest = read_story_dir(story_dir, latest=True)
    assert {i: p.parent.parent.name for i, p in newest.shots.items()} == {
        1: "20250101_120500",
        3: "20250101_120500",
    }
    assert read_outputs(OUTPUTS, latest=True)[RUN_A].stories["02"].shots == newest.shots


def test_language_first_is_preferred_when_both_exist(tmp_path: Path) -> None:
    touch_image(tmp_path / "m/en/base/20250101_120000/01/shot_01.png")
    touch_image(tmp_path / "m/base/en/20250101_120000/01/shot_01.png")
    assert detect_layout(tmp_path / "m") == "B"
    runs = read_outputs(tmp_path)
    # layout B reads "base" as a language folder: not one, so it is skipped
    assert list(runs) == [RunKey("m", "base", "en", "20250101_120000")]
    assert runs[RunKey("m", "base", "en", "20250101_120000")].layout == "B"


def test_a_tree_in_neither_layout_names_the_folder(tmp_path: Path) -> None:
    touch_image(tmp_path / "m/base/english/20250101_120000/01/shot_01.png")
    with pytest.raises(LayoutError) as caught:
        read_outputs(tmp_path)
    assert str(tmp_path / "m") in str(caught.value)
    assert "neither" in str(caught.value)
    with pytest.raises(LayoutError, match=str(tmp_path / "absent")):
        read_outputs(tmp_path / "absent")
    with pytest.raises(LayoutError, match="no method folder"):
        read_outputs(tmp_path / "m/base/english/20250101_120000/01")


def test_suffixed_shot_and_character_folders(tmp_path: Path) -> None:
    story = tmp_path / "story"
    touch_image(story / "gen_shots" / "shot_2.png")
    touch_image(story / "gen_shots" / "shot_10.bmp")
    touch_image(story / "characters" / "Captain Bo.png")
    touch_image(story / "stray.png")
    found = read_story_dir(story)
    assert found.shots == {2: story / "gen_shots/shot_2.png", 10: story / "gen_shots/shot_10.bmp"}
    assert found.chars == {"Captain Bo": story / "characters/Captain Bo.png"}


def test_unusable_names_are_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = tmp_path / "m/base/en/20250101_120000"
    touch_image(run / "01/shots/shot_01.png")
    touch_image(run / "01/shots/cover.png")
    touch_image(run / "01/shots/.shot_02.png.tmp")
    (run / "01/shots/notes.txt").write_text("not an image")
    touch_image(run / "misc/shot_01.png")
    with caplog.at_level(logging.WARNING, logger="omnistory"):
        runs = read_outputs(tmp_path)
    story_ids = sorted(runs[RunKey("m", "base", "en", "20250101_120000")].stories)
    assert story_ids == ["01"]
    assert runs[RunKey("m", "base", "en", "20250101_120000")].stories["01"].shots == {
        1: run / "01/shots/shot_01.png"
    }
    messages = [r.getMessage() for r in caplog.records]
    assert any("cover.png" in m and "no shot index" in m for m in messages)
    assert any(str(run / "misc") in m and "not a story folder" in m for m in messages)


@pytest.mark.parametrize(
    ("name", "index"),
    [("shot_07.png", 7), ("shot_1.jpg", 1), ("3.jpeg", 3), ("story_01_shot_12.png", 12)],
)
def test_shot_index_follows_the_official_rule(name: str, index: int) -> None:
    assert shot_index_of(name) == index
