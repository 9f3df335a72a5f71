"""A content fingerprint of a list of examples, for run manifests."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from omnistory_core.contract import StoryExample
from omnistory_core.data.errors import DatasetError, Problem

FINGERPRINT_VERSION = "omnistory-dataset-fingerprint/v1"


def fingerprint(examples: Sequence[StoryExample]) -> str:
    """SHA-256 (hex) over the examples' content, in order.

    Covers ids, indices, texts, metadata, conditions, the reference speech target, and the bytes of
    every referenced image (current and next page).  File paths are not hashed, so the same data
    gives the same fingerprint on any machine and from any folder; ``extra`` is not hashed either.
    """
    image_digests: dict[str, str] = {}

    def image_sha256(path: str, example: StoryExample, field: str) -> str:
        if path not in image_digests:
            digest = hashlib.sha256()
            try:
                with open(path, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        digest.update(block)
            except OSError as exc:
                raise DatasetError(
                    "cannot fingerprint the dataset",
                    [Problem(path, field, str(exc), example.index, example.id)],
                ) from exc
            image_digests[path] = digest.hexdigest()
        return image_digests[path]

    records: list[dict[str, Any]] = []
    for example in examples:
        reference = example.reference
        records.append(
            {
                "id": example.id,
                "index": example.index,
                "source": example.source,
                "book": example.book,
                "from_key": example.from_key,
                "to_key": example.to_key,
                "current": {
                    "text": example.current.text,
                    "image_sha256": image_sha256(example.current.image, example, "current_image"),
                },
                "metadata": example.metadata,
                "conditions": example.conditions,
                "reference": {
                    "next_page": {
                        "text": reference.next_page.text,
                        "image_sha256": image_sha256(
                            reference.next_page.image, example, "next_image"
                        ),
                    },
                    "speech": reference.speech.to_dict(),
                },
            }
        )
    payload = json.dumps(
        {"version": FINGERPRINT_VERSION, "examples": records},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
