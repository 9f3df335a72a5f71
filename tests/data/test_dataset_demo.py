"""The bundled demo dataset: its promises, reproducibility, limit, and load_dataset."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from omnistory_core.contract import EMOTIONS, GENDERS, PITCHES, SPEEDS
from omnistory_core.data import DatasetError, demo_root, load_dataset, load_demo

QUOTE = re.compile(r'"([^"]+)"')


@pytest.fixture(scope="module")
def demo():
    return load_demo()


def test_demo_has_ten_transitions_in_candidate_order(demo):
    assert len(demo) == 10
    assert [example.index for example in demo] == list(range(10))
    assert len({example.id for example in demo}) == 10
    for example in demo:
        assert example.source == "omnistorydemo"
        assert example.id == f"{example.source}/{example.book}/{example.from_key}__{example.to_key}"
    assert len({example.book for example in demo}) == 3


def test_demo_speech_targets_cover_every_label(demo):
    speech = [example.reference.speech for example in demo]
    assert {s.emotion for s in speech} == set(EMOTIONS)
    assert {s.speed for s in speech} == set(SPEEDS)
    assert {s.pitch for s in speech} == set(PITCHES)
    assert {s.gender for s in speech} == set(GENDERS)


def test_demo_images_decode(demo):
    paths = {
        p for example in demo for p in (example.current.image, example.reference.next_page.image)
    }
    assert len(paths) == 13  # 5 + 4 + 4 pages
    for path in paths:
        assert Path(path).is_absolute()
        with Image.open(path) as image:
            rgb = image.convert("RGB")
        assert rgb.size == (384, 384)
        # a real drawing, not a blank page
        assert len(rgb.getcolors(maxcolors=1 << 16) or []) > 10


def test_demo_pages_of_a_book_chain(demo):
    """The next page of one transition is the current page of the following one."""
    for before, after in zip(demo, demo[1:], strict=False):
        if before.book == after.book:
            assert before.to_key == after.from_key
            assert before.reference.next_page.image == after.current.image
            assert before.reference.next_page.text == after.current.text


def test_demo_narration_holds_exactly_the_target_utterance(demo):
    for example in demo:
        text = example.reference.next_page.text
        assert 80 <= len(text) <= 160
        assert 80 <= len(example.current.text) <= 160
        quotes = QUOTE.findall(text)
        assert len(quotes) == 1, example.id
        assert quotes[0].rstrip(",") == example.reference.speech.utterance


def test_demo_conditions_and_metadata_follow_the_schema(demo):
    for example in demo:
        assert set(example.conditions) == {
            "characters",
            "scene",
            "text_instruction",
            "ambient_sound",
        }
        names = []
        for character in example.conditions["characters"]:
            assert set(character) == {"name", "emotion", "speech_intent", "action", "visibility"}
            assert all(isinstance(v, str) and v for v in character.values())
            names.append(character["name"])
        assert example.reference.speech.speaker in names
        assert set(example.metadata) == {
            "genre",
            "topic",
            "style",
            "narrative_tense",
            "narrative_perspective",
            "characters",
        }
        for character in example.metadata["characters"]:
            assert {
                "name",
                "sex",
                "age_range",
                "species",
                "role",
                "personality",
                "appearance",
            } <= set(character)


def test_demo_input_view_has_no_reference(demo):
    view = demo[0].input_view()
    assert not hasattr(view, "reference")
    assert view.current == demo[0].current


def test_demo_folder_is_small_and_licensed():
    root = demo_root()
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert total < 1_500_000
    license_text = (root / "LICENSE.md").read_text(encoding="utf-8")
    assert "CC BY 4.0" in license_text and "omnistory_core contributors" in license_text
    for meta in (root / "metadata" / "omnistorydemo").glob("*.json"):
        data = json.loads(meta.read_text(encoding="utf-8"))
        assert data["license"] == "CC-BY-4.0"
        assert data["attribution"] == "omnistory_core contributors"


def test_generator_reproduces_the_bundled_files(tmp_path, demo_tool, read_rows):
    out = tmp_path / "demo"
    demo_tool.write_demo(out)
    bundled = demo_root()
    ours = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    theirs = sorted(
        p.relative_to(bundled)
        for p in bundled.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert ours == theirs
    assert read_rows(out) == read_rows(bundled)
    for rel in ours:
        if rel.suffix == ".png":
            with Image.open(out / rel) as a, Image.open(bundled / rel) as b:
                assert a.convert("RGB").tobytes() == b.convert("RGB").tobytes(), rel
        elif rel.suffix != ".parquet":
            assert (out / rel).read_bytes() == (bundled / rel).read_bytes(), rel


def test_limit_keeps_the_first_rows(demo):
    three = load_demo(limit=3)
    assert [e.id for e in three] == [e.id for e in demo[:3]]
    assert load_demo(limit=0) == []
    assert len(load_demo(limit=100)) == 10
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(DatasetError, match="limit"):
            load_demo(limit=bad)


def test_load_dataset_spec(demo):
    assert [e.id for e in load_dataset({"name": "demo"})] == [e.id for e in demo]
    assert len(load_dataset({"name": "demo", "root": None, "limit": 4})) == 4
    with pytest.raises(DatasetError, match="unknown dataset name 'nope'"):
        load_dataset({"name": "nope"})


def test_loading_the_demo_imports_no_heavy_stack():
    code = (
        "import sys\n"
        "from omnistory_core.data import load_demo, fingerprint\n"
        "fingerprint(load_demo())\n"
        "heavy = [m for m in ('torch', 'transformers', 'huggingface_hub') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
