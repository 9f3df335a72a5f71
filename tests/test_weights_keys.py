"""Weights are part of the call key: a local checkpoint file or model directory a component
declares (``Param(..., weights=True)``) keys its calls by content, hashed once and remembered by
path, size and mtime; without local weights the key is what it always was."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from omnistory_core import fingerprints
from omnistory_core.api import ImageExpert, Param
from omnistory_core.components import WEIGHTS_KEY
from omnistory_core.engine.hashing import call_key
from omnistory_core.engine.stage import item_key
from omnistory_core.params import key_params


class Drawer(ImageExpert):
    name = "drawer"
    version = "1"
    reads = ("image_prompt",)
    parameters = (
        Param("model", str, "org/drawer", "hub id or local directory", weights=True),
        Param("head", (str, None), None, "head weights file", weights=True),
        Param("steps", int, 4, "steps"),
    )


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "fingerprint-cache"
    monkeypatch.setenv(fingerprints.CACHE_ENV, str(folder))
    fingerprints._memory.clear()
    return folder


def key_of(component: Drawer) -> str:
    return item_key(component, {"image_prompt": "a fox"})


def test_without_local_weights_the_key_is_unchanged(tmp_path: Path) -> None:
    for params in ({}, {"model": "org/other"}, {"head": str(tmp_path / "absent.pth")}):
        component = Drawer(**params)
        plain = key_params(Drawer, component.params)
        assert WEIGHTS_KEY not in component.output_params()
        # byte-identical to the key computed without any weights declaration
        expected = call_key("image/drawer", "1", plain, {"image_prompt": "a fox"})
        assert key_of(component) == expected


def test_a_local_file_keys_by_content(tmp_path: Path) -> None:
    head = tmp_path / "head.pth"
    head.write_bytes(b"weights one")
    first = Drawer(head=str(head))
    assert first.output_params()[WEIGHTS_KEY] == {
        "head": "sha256:" + fingerprints._hash(head.resolve())
    }
    before = key_of(first)
    assert key_of(Drawer(head=str(head))) == before  # the same file: the same key
    head.write_bytes(b"weights two, longer")  # replaced at the same path
    assert key_of(Drawer(head=str(head))) != before


def test_a_local_directory_keys_by_its_files(tmp_path: Path) -> None:
    model = tmp_path / "drawer-model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "sub" / "weights.bin").write_bytes(b"abc")
    (model / ".cache").mkdir()
    (model / ".cache" / "lock").write_text("x")
    before = key_of(Drawer(model=str(model)))
    assert Drawer(model=str(model)).output_params()[WEIGHTS_KEY]["model"].startswith("tree:")
    (model / ".cache" / "lock").write_text("changed")  # dot-entries are not weights
    assert key_of(Drawer(model=str(model))) == before
    (model / "sub" / "weights.bin").write_bytes(b"abd")
    assert key_of(Drawer(model=str(model))) != before


def test_a_file_is_hashed_once_and_remembered_by_path_size_and_mtime(
    tmp_path: Path, cache: Path
) -> None:
    head = tmp_path / "head.pth"
    head.write_bytes(b"twelve bytes")
    real = fingerprints.weights_fingerprint(head)
    (entry,) = cache.glob("*.json")
    record = json.loads(entry.read_text())
    assert (record["size"], record["sha256"]) == (12, real.removeprefix("sha256:"))
    # another process (an empty memory) reads the remembered digest without rehashing: a
    # planted digest for the same path, size and mtime is what it answers
    planted = "0" * 64
    entry.write_text(json.dumps({**record, "sha256": planted}))
    fingerprints._memory.clear()
    assert fingerprints.weights_fingerprint(head) == f"sha256:{planted}"
    # a new mtime (the file touched or replaced) hashes again
    stat = head.stat()
    os.utime(head, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    fingerprints._memory.clear()
    assert fingerprints.weights_fingerprint(head) == real


def test_declared_weights_are_listed_by_plugins_params() -> None:
    rows = {row["name"]: row for row in (p.row() for p in Drawer.parameters or ())}
    assert rows["model"]["weights"] is True and "weights" not in rows["steps"]
