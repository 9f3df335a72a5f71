"""Content hashes and call keys."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from omnistory_core.components import Media


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class MediaHasher:
    """Hash each file once per hasher (share one across jobs, or across the systems an evaluation
    scores, and each dataset file is read once)."""

    def __init__(self) -> None:
        self._cache: dict[str, Media] = {}

    def __call__(self, path: str | os.PathLike[str]) -> Media:
        key = os.fspath(path)
        media = self._cache.get(key)
        if media is None:
            media = self._cache[key] = Media(path=key, sha256=sha256_file(key))
        return media


def _by_content(value: Any) -> Any:
    """``value`` with every :class:`Media` inside it (a list of reference images, say) replaced by
    its content hash; a value holding no Media comes back equal, so its digest is unchanged."""
    if isinstance(value, Media):
        return {"__media_sha256__": value.sha256}
    if isinstance(value, dict):
        return {k: _by_content(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_by_content(v) for v in value]
    return value


def digest(value: Any) -> str:
    """A content digest of one input value (files by content, never by path, also inside lists
    and mappings)."""
    if isinstance(value, Media):
        return "media:" + value.sha256
    return "json:" + sha256_bytes(canonical_json(_by_content(value)).encode("utf-8"))


def call_key(component: str, version: str, params: dict[str, Any], inputs: dict[str, Any]) -> str:
    """hash(component name + version + output-changing params + content hashes of the inputs)."""
    payload = {
        "component": component,
        "version": version,
        "params": params,
        "inputs": {name: digest(v) for name, v in sorted(inputs.items())},
    }
    return sha256_bytes(canonical_json(payload).encode("utf-8"))
