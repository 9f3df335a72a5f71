"""fingerprint(): content-only, path-independent."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from omnistory_core.contract import Page
from omnistory_core.data import DatasetError, fingerprint, load_demo, load_official


def test_same_data_in_another_folder_gives_the_same_fingerprint(release, tmp_path):
    moved = tmp_path / "elsewhere" / "deeper" / "copy"
    shutil.copytree(release, moved)
    first, second = load_official(release), load_official(moved)
    assert first[0].current.image != second[0].current.image
    assert fingerprint(first) == fingerprint(second) == fingerprint(load_demo())
    assert len(fingerprint(first)) == 64 and int(fingerprint(first), 16) >= 0


def test_one_changed_image_byte_changes_the_fingerprint(release):
    examples = load_official(release)
    before = fingerprint(examples)
    path = examples[4].reference.next_page.image
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(path, "wb").write(bytes(data))
    assert fingerprint(examples) != before
    data[len(data) // 2] ^= 0x01
    open(path, "wb").write(bytes(data))
    assert fingerprint(examples) == before


def test_text_order_and_subset_change_the_fingerprint():
    examples = load_demo()
    base = fingerprint(examples)
    edited = dataclasses.replace(
        examples[0], current=Page(examples[0].current.image, "Other text.")
    )
    assert fingerprint([edited, *examples[1:]]) != base
    assert fingerprint(list(reversed(examples))) != base
    assert fingerprint(examples[:9]) != base


def test_missing_image_is_a_dataset_error(release):
    examples = load_official(release)
    (release / examples[0].extra["relative_paths"]["current_image"]).unlink()
    with pytest.raises(DatasetError, match="current_image"):
        fingerprint(examples)
