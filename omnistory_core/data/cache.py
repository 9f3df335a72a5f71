"""The dataset of a run, loaded and validated once per process.

A sweep's jobs (and the evaluation after it) all ask for the same dataset; :func:`load_examples`
looks the dataset up among the registered dataset plugins, loads it once and keeps it with its
fingerprint for the rest of the process.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from omnistory_core.contract import StoryExample

_DATASET_CACHE: dict[str, tuple[list[StoryExample], str]] = {}


def dataset_spec(cfg: DictConfig) -> dict[str, Any]:
    """The ``dataset`` node of a run config as a plain dict (interpolations resolved)."""
    return OmegaConf.to_container(cfg.dataset, resolve=True)  # type: ignore[return-value]


def load_examples(spec: Mapping[str, Any]) -> tuple[list[StoryExample], str]:
    """Load and validate a dataset once per process; returns (examples, fingerprint).

    Raises :class:`~omnistory_core.data.DatasetError` for a dataset name no plugin registers
    (naming the known ones) or for any problem the loader finds."""
    from omnistory_core.data import fingerprint
    from omnistory_core.plugins import load_plugins

    cache_key = json.dumps(spec, sort_keys=True, default=str)
    if cache_key not in _DATASET_CACHE:
        registry = load_plugins()
        name = str(spec.get("name"))
        if name not in registry.datasets:
            from omnistory_core.data import DatasetError

            raise DatasetError(
                f"no dataset named {name!r}; known: {', '.join(sorted(registry.datasets))}"
            )
        examples = registry.datasets[name](dict(spec))
        _DATASET_CACHE[cache_key] = (examples, _fingerprint(examples, fingerprint))
    return _DATASET_CACHE[cache_key]


def _fingerprint(records: list[Any], story_fingerprint: Any) -> str:
    """The story-continuation fingerprint for :class:`StoryExample` records; for another task's
    records (a ViStoryBench shot), a digest of their fields: any loader's output validates here,
    and the task's own job computes the fingerprint it records."""
    if all(isinstance(r, StoryExample) for r in records):
        return story_fingerprint(records)
    import dataclasses
    import hashlib

    rows = [
        dataclasses.asdict(r)
        if dataclasses.is_dataclass(r) and not isinstance(r, type)
        else repr(r)
        for r in records
    ]
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()
