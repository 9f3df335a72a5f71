"""load_official on copies of the release layout, intact and corrupted."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from omnistory_core.data import DatasetError, Problem, fingerprint, load_demo, load_official
from omnistory_core.data.errors import MAX_PROBLEMS_SHOWN
from omnistory_core.data.schema import PARQUET_RELATIVE_PATH

PARQUET = PARQUET_RELATIVE_PATH


def load_error(root: Path, **kwargs) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load_official(root, **kwargs)
    return info.value


def find(error: DatasetError, *, field: str, row: int | None = None) -> Problem:
    matches = [p for p in error.problems if p.field == field and (row is None or p.row == row)]
    assert matches, f"no problem for field {field!r} row {row}: {error}"
    return matches[0]


def assert_named(error: DatasetError, problem: Problem, *, file: str, row: int, example_id: str):
    """The problem and the rendered message name file, row, example id and field."""
    assert (problem.file, problem.row, problem.example_id) == (file, row, example_id)
    line = next(
        line
        for line in str(error).splitlines()
        if f"field {problem.field!r}" in line and f"row {row}," in line
    )
    assert file in line and f"row {row}," in line and example_id in line


# -- intact copies ----------------------------------------------------------------------------


def test_copy_loads_like_the_bundled_demo(release):
    bundled = load_demo()
    copied = load_official(release)
    assert [e.id for e in copied] == [e.id for e in bundled]
    assert [e.reference for e in copied][0].speech == bundled[0].reference.speech
    for example in copied:
        assert Path(example.current.image).is_relative_to(release)
        assert Path(example.reference.next_page.image).is_relative_to(release)
        assert example.extra["dataset_root"] == str(release)
        assert Path(example.extra["files"]["sample_path"]).is_file()
    assert copied[0].extra["relative_paths"] == bundled[0].extra["relative_paths"]
    assert fingerprint(copied) == fingerprint(bundled)


def test_limit_validates_only_the_rows_it_keeps(release, edit_rows):
    edit_rows(release, lambda rows: rows[9].update(speech_emotion="furious"))
    assert len(load_official(release, limit=5)) == 5
    assert find(load_error(release), field="speech_emotion", row=9)


def test_any_number_of_rows(release, edit_rows):
    edit_rows(release, lambda rows: rows.__delitem__(slice(4, None)))
    assert [e.index for e in load_official(release)] == [0, 1, 2, 3]


def test_symlinked_files_are_fine(release, tmp_path):
    """A Hugging Face cache snapshot links its files to blobs outside the snapshot folder."""
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    for image in (release / "images").rglob("*.png"):
        blob = blobs / f"{image.parent.name}-{image.name}"
        shutil.move(image, blob)
        os.symlink(blob, image)
    assert len(load_official(release)) == 10


# -- the four corruptions the issue names -----------------------------------------------------


def test_furious_emotion_names_row_id_and_field(release, edit_rows):
    rows = edit_rows(release, lambda rows: rows[3].update(speech_emotion="furious"))
    error = load_error(release)
    problem = find(error, field="speech_emotion", row=3)
    assert "'furious' is not one of angry, happy, neutral, sad" in problem.message
    assert_named(error, problem, file=PARQUET, row=3, example_id=rows[3]["id"])


def test_deleted_image_names_both_rows_that_use_it(release, read_rows):
    rows = read_rows(release)
    (release / rows[1]["next_image"]).unlink()  # next page of row 1 = current page of row 2
    error = load_error(release)
    as_next = find(error, field="next_image", row=1)
    as_current = find(error, field="current_image", row=2)
    assert "does not exist" in as_next.message and rows[1]["next_image"] in as_next.message
    assert_named(error, as_next, file=PARQUET, row=1, example_id=rows[1]["id"])
    assert_named(error, as_current, file=PARQUET, row=2, example_id=rows[2]["id"])


def test_broken_json_in_condition_characters(release, edit_rows):
    rows = edit_rows(
        release, lambda rows: rows[5].update(condition_characters='[{"name": "Omar", "emotion": ')
    )
    error = load_error(release)
    problem = find(error, field="condition_characters", row=5)
    assert problem.message.startswith("invalid JSON")
    assert_named(error, problem, file=PARQUET, row=5, example_id=rows[5]["id"])


def test_list_column_of_the_wrong_type(release, edit_rows):
    edit_rows(release, lambda rows: rows[0].update(book_characters='{"name": "Lena"}'))
    edit_rows(release, lambda rows: rows[1].update(condition_characters='["Pip"]'))
    error = load_error(release)
    assert (
        "expected a JSON list of objects, got dict"
        in find(error, field="book_characters", row=0).message
    )
    assert "item 0 is str" in find(error, field="condition_characters", row=1).message


def test_mismatched_id(release, edit_rows):
    bad = "omnistorydemo/omar-and-the-red-kite/page_009__page_010"
    rows = edit_rows(release, lambda rows: rows[4].update(id=bad))
    error = load_error(release)
    problem = find(error, field="id", row=4)
    assert problem.message == (
        f"{bad!r} does not match source/book/from_key__to_key = "
        "'omnistorydemo/omar-and-the-red-kite/page_001__page_002'"
    )
    assert_named(error, problem, file=PARQUET, row=4, example_id=bad)
    # the per-sample JSON still carries the true id, and that is reported against its file
    sample = next(p for p in error.problems if p.file == rows[4]["sample_path"] and p.field == "id")
    assert bad in sample.message


# -- other validations ------------------------------------------------------------------------


def test_missing_column(release, edit_rows):
    edit_rows(release, lambda rows: [row.pop("speech_pitch") for row in rows])
    error = load_error(release)
    assert error.problems == (Problem(PARQUET, "speech_pitch", "required column is missing"),)
    assert "lacks required columns" in str(error) and "speech_pitch" in str(error)


def test_unreadable_parquet_names_the_file(release):
    (release / PARQUET).write_bytes(b"this is not a parquet file")
    error = load_error(release)
    assert "cannot read parquet file" in str(error) and str(release / PARQUET) in str(error)


def test_missing_parquet_and_missing_root(release, tmp_path):
    error = load_error(tmp_path / "nowhere")
    assert "is not a directory" in str(error) and "dataset.root=PATH" in str(error)
    (release / PARQUET).unlink()
    assert "data/omni_storybench.parquet" in str(load_error(release))


def test_empty_required_text_and_null(release, edit_rows):
    def corrupt(rows):
        rows[2]["next_text"] = "   "
        rows[6]["next_text"] = None
        rows[7]["genre"] = ""  # book metadata may be empty: unknowns are ""
        rows[8]["scene"] = None  # free text may be empty, never absent

    edit_rows(release, corrupt)
    error = load_error(release)
    assert find(error, field="next_text", row=2).message == "required text is empty"
    assert find(error, field="next_text", row=6).message == "value is missing (null)"
    assert find(error, field="scene", row=8).message == "value is missing (null)"
    assert not [p for p in error.problems if p.row == 7 and p.file == PARQUET]


def test_sample_json_must_agree_with_the_row(release, read_rows):
    rows = read_rows(release)
    path = release / rows[8]["sample_path"]
    sample = json.loads(path.read_text(encoding="utf-8"))
    sample["ground_truth"]["speech"]["speaker"] = "Someone else"
    sample["next_page_condition"]["characters"][0]["emotion"] = "bored"
    del sample["book_metadata_path"]
    path.write_text(json.dumps(sample), encoding="utf-8")
    error = load_error(release)
    speaker = find(error, field="ground_truth.speech.speaker", row=8)
    assert speaker.file == rows[8]["sample_path"] and speaker.example_id == rows[8]["id"]
    assert '"Someone else"' in speaker.message and '"Bo"' in speaker.message
    assert find(error, field="next_page_condition.characters[0].emotion", row=8)
    assert (
        find(error, field="book_metadata_path", row=8).message == "missing from the per-sample JSON"
    )


def test_unreadable_sample_json(release, read_rows):
    rows = read_rows(release)
    (release / rows[0]["sample_path"]).write_text("{not json", encoding="utf-8")
    problem = find(load_error(release), field="(file)", row=0)
    assert problem.file == rows[0]["sample_path"] and "cannot be read" in problem.message


def test_paths_must_stay_inside_the_root(release, edit_rows, tmp_path):
    outside = tmp_path / "outside.png"
    shutil.copy(release / "images/omnistorydemo/lena-and-the-lost-moon/page_001.png", outside)

    def corrupt(rows):
        rows[0]["current_image"] = "../outside.png"
        rows[1]["metadata_path"] = str(release / rows[1]["metadata_path"])

    edit_rows(release, corrupt)
    error = load_error(release)
    assert "escapes the dataset root" in find(error, field="current_image", row=0).message
    assert "must be relative" in find(error, field="metadata_path", row=1).message


def test_file_that_is_not_an_image(release, read_rows):
    rows = read_rows(release)
    (release / rows[0]["current_image"]).write_text("not a png")
    assert "not a readable image" in find(load_error(release), field="current_image", row=0).message


def test_duplicate_ids(release, edit_rows):
    edit_rows(release, lambda rows: rows.append(dict(rows[0])))
    problem = find(load_error(release), field="id", row=10)
    assert problem.message == "duplicate id (first used by row 0)"


def test_label_case_variants_are_the_same_label(release, read_rows, edit_rows):
    """The official scorer compares labels after strip().lower(); so does validation."""
    rows = edit_rows(release, lambda rows: rows[0].update(speech_emotion=" Neutral"))
    path = release / rows[0]["sample_path"]
    sample = json.loads(path.read_text(encoding="utf-8"))
    sample["ground_truth"]["speech"]["emotion"] = " Neutral"
    path.write_text(json.dumps(sample), encoding="utf-8")
    assert load_official(release)[0].reference.speech.emotion == "neutral"


def test_all_problems_are_reported_together(release, edit_rows):
    def corrupt(rows):
        for row in rows:
            row["speech_gender"] = "robot"

    edit_rows(release, corrupt)
    error = load_error(release)
    assert sorted(p.row for p in error.problems if p.field == "speech_gender") == list(range(10))


def test_message_is_capped():
    problems = [Problem("f.parquet", "speech_speed", "bad", row, f"id{row}") for row in range(60)]
    text = str(DatasetError("broken", problems))
    assert "(60 problem(s))" in text
    assert text.count("field 'speech_speed'") == MAX_PROBLEMS_SHOWN
    assert "and 10 more not shown" in text


# -- the release quirk ------------------------------------------------------------------------


def test_absent_speech_intent_quirk(release, read_rows, edit_rows):
    """Rows whose absent speech_intent the exporter wrote as "" load, with the key removed again."""
    quirk_id = "digitallibrary/the-green-apple/page_006__page_007"
    characters = [
        {
            "name": "Strawberry",
            "emotion": "shy",
            "speech_intent": "",
            "action": "hides",
            "visibility": "partly visible",
        },
        {
            "name": "Apple",
            "emotion": "kind",
            "speech_intent": "invite Strawberry to play",
            "action": "waves",
            "visibility": "fully visible",
        },
    ]

    def corrupt(rows):
        rows[0].update(
            id=quirk_id,
            source="digitallibrary",
            book="the-green-apple",
            from_key="page_006",
            to_key="page_007",
            condition_characters=json.dumps(characters),
            sample_path="samples/digitallibrary/the-green-apple/page_006__page_007.json",
        )

    rows = read_rows(release)
    sample = json.loads((release / rows[0]["sample_path"]).read_text(encoding="utf-8"))
    edit_rows(release, corrupt)
    sample.update(
        id=quirk_id,
        source="digitallibrary",
        book="the-green-apple",
        transition={"from": "page_006", "to": "page_007"},
    )
    sample["next_page_condition"]["characters"] = [
        {k: v for k, v in c.items() if not (c["name"] == "Strawberry" and k == "speech_intent")}
        for c in characters
    ]
    target = release / "samples/digitallibrary/the-green-apple/page_006__page_007.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(sample), encoding="utf-8")

    example = load_official(release)[0]
    strawberry, apple = example.conditions["characters"]
    assert "speech_intent" not in strawberry
    assert apple["speech_intent"] == "invite Strawberry to play"
    assert example.extra["normalisations"] and "speech_intent" in example.extra["normalisations"][0]
