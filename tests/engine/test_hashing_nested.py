"""Media inside lists and mappings is keyed by content and crosses the worker boundary."""

from __future__ import annotations

import json
from pathlib import Path

from omnistory_core.components import Media
from omnistory_core.engine.hashing import MediaHasher, digest
from omnistory_core.engine.worker import decode_value, encode_value


def _two_copies(tmp_path: Path) -> tuple[Media, Media]:
    a, b = tmp_path / "a" / "ref.jpg", tmp_path / "b" / "elsewhere.jpg"
    for path in (a, b):
        path.parent.mkdir()
        path.write_bytes(b"the same pixels")
    hasher = MediaHasher()
    return hasher(a), hasher(b)


def test_nested_media_is_keyed_by_content_not_path(tmp_path: Path) -> None:
    here, there = _two_copies(tmp_path)
    refs = [{"key": "Pip", "images": [here]}]
    moved = [{"key": "Pip", "images": [there]}]
    assert digest(refs) == digest(moved)
    other = tmp_path / "c.jpg"
    other.write_bytes(b"other pixels")
    changed = [{"key": "Pip", "images": [MediaHasher()(other)]}]
    assert digest(changed) != digest(refs)


def test_values_without_media_keep_their_digest() -> None:
    # the digest of plain JSON values is what it always was (cache keys of existing stores)
    import hashlib

    value = {"scene": "a forest", "characters": ["Pip", "Bo"], "n": 2}
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert digest(value) == "json:" + hashlib.sha256(canonical.encode()).hexdigest()


def test_nested_media_round_trips_through_the_worker_encoding(tmp_path: Path) -> None:
    here, _ = _two_copies(tmp_path)
    value = [{"key": "Pip", "images": [here], "tag": "non_human"}]
    wire = json.loads(json.dumps(encode_value(value)))
    assert decode_value(wire) == value
    assert decode_value(wire)[0]["images"][0] == here
