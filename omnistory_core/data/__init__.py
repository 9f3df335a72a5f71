"""Datasets: the official Omni-StoryBench release and the bundled offline demo.

``load_dataset({"name": "demo"})`` or ``load_dataset({"name": "omnistorybench", "root": PATH})``
returns validated :class:`~omnistory_core.contract.StoryExample` objects in candidate-index order;
any problem raises :class:`DatasetError` naming file, row, example id and field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omnistory_core.contract import StoryExample
from omnistory_core.data.demo import demo_root, load_demo
from omnistory_core.data.errors import DatasetError, Problem
from omnistory_core.data.fingerprint import fingerprint
from omnistory_core.data.hub import resolve_root
from omnistory_core.data.official import check_limit, load_official
from omnistory_core.data.schema import HF_REPO_ID

DATASET_NAMES: tuple[str, ...] = ("demo", "omnistorybench")

__all__ = [
    "DATASET_NAMES",
    "DatasetError",
    "Problem",
    "demo_root",
    "fingerprint",
    "load_dataset",
    "load_demo",
    "load_official",
    "resolve_root",
]


def load_dataset(spec: Mapping[str, Any]) -> list[StoryExample]:
    """Load the dataset a config describes.

    ``spec`` keys: ``name`` (``"demo"`` or ``"omnistorybench"``), optional ``root`` (local copy of
    the release; absent or missing -> downloaded if ``download`` is true, the default), ``limit``
    (first N rows), ``strict`` (refuse keys the release schema does not define instead of warning,
    default false), ``download`` and ``repo_id`` (default ``snu-aidas/Omni-StoryBench``).  Other
    keys (for example Hydra's ``_target_``-free bookkeeping) are ignored.
    """
    name = spec.get("name")
    limit = check_limit(spec.get("limit"))
    strict = _flag(spec.get("strict", False), "strict")
    if name == "demo":
        return load_demo(limit=limit, strict=strict)
    if name == "omnistorybench":
        root = resolve_root(
            spec.get("root"),
            repo_id=str(spec.get("repo_id") or HF_REPO_ID),
            download=_flag(spec.get("download", True), "download"),
        )
        return load_official(root, limit=limit, strict=strict)
    raise DatasetError(f"unknown dataset name {name!r}; expected one of {', '.join(DATASET_NAMES)}")


def _flag(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    raise DatasetError(f"dataset.{key} must be true or false, got {value!r}")
