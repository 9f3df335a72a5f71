"""The shots a ViStoryBench job draws: the dataset loaded for the job (``dataset.root``, split,
language, stories; the bundled fixture), each shot's inputs (the task's ``inputs``, built by
:func:`shot_inputs`), the pools the stages read, and the system that draws them.

Below the job (:mod:`omnistory_vistorybench.generate`), its dry run
(:mod:`omnistory_vistorybench.dryrun`) and the evaluation, which all read the dataset and the
shots the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.api import Component, ConfigError, DatasetError, Failure, Media
from omnistory_core.kit.jobs import (
    CallRecord,
    MediaHasher,
)
from omnistory_vistorybench import dataset as vistory
from omnistory_vistorybench import records

log = logging.getLogger("omnistory")

#: the dataset configs of this task; the fixture's root may be left unset
DATASETS: tuple[str, ...] = ("vistory", "vistory_fixture")
FIXTURE_DATASET = "vistory_fixture"


@dataclass(frozen=True)
class ShotSystem:
    """What a ViStoryBench job runs: an optional planner and one image expert, under a system id
    (the ``<method>``)."""

    system_id: str
    image: dict[str, Any]
    planner: dict[str, Any] | None = None
    #: ``image`` is a backbone's node: it draws the shots (:mod:`omnistory_vistorybench.backbones`)
    backbone: bool = False


@dataclass(frozen=True)
class LoadedDataset:
    """The job's dataset: its spec (root resolved), stories, shot records and fingerprint."""

    spec: dict[str, Any]
    stories: list[records.Story]
    records: list[records.ShotRecord]
    fingerprint: str


class RefMedia(Media):
    """A reference image inside ``character_refs``, written into a cache key by content.

    The core's call key hashes a top-level :class:`Media` by its content but serialises one nested
    in a list with ``str()``, which for the dataclass includes its path; this ``str()`` is the
    content hash alone, so a copy of the dataset elsewhere hits the same cached calls.
    """

    def __str__(self) -> str:
        return f"media:{self.sha256}"


# -- dataset ------------------------------------------------------------------------------------


def dataset_root(spec: Mapping[str, Any]) -> Path:
    """``dataset.root``, or the bundled fixture for ``dataset=vistory_fixture``."""
    root = spec.get("root")
    if root in (None, "", "???"):
        if spec.get("name") == FIXTURE_DATASET:
            return vistory.fixture_root()
        raise ConfigError(
            "dataset.root is not set: point it at the folder holding ViStory/<NN>/story.json"
            " (dataset.root=/path/to/ViStoryBench), or use dataset=vistory_fixture"
        )
    return Path(str(root)).expanduser().resolve()


def load_dataset(spec: Mapping[str, Any]) -> LoadedDataset:
    """The stories and shot records of the ``dataset`` config; a bad dataset is one line."""
    name = spec.get("name")
    if name not in DATASETS:
        raise ConfigError(
            f"dataset={name} is not a ViStory dataset: task vistorybench reads"
            " dataset=vistory dataset.root=DIR or dataset=vistory_fixture"
        )
    root = dataset_root(spec)
    split = str(spec.get("split") or "full")
    language = str(spec.get("language") or "en")
    wanted = spec.get("stories")
    try:
        stories = vistory.load_stories(
            root,
            split=split,
            language=language,
            stories=list(wanted) if wanted is not None else None,
        )
        fingerprint = vistory.dataset_fingerprint(stories)
    except DatasetError as exc:
        raise DatasetError(one_line(exc)) from None
    resolved = {**spec, "root": str(root), "split": split, "language": language}
    records = vistory.shot_records(stories)
    return LoadedDataset(resolved, stories, records, fingerprint)


def one_line(exc: DatasetError) -> str:
    """A dataset error as one line: the summary (it names the file) and the first problems."""
    shown = [
        p.message if p.field == records.WHOLE_FILE else f"{p.field}: {p.message}"
        for p in exc.problems[:3]
    ]
    more = len(exc.problems) - len(shown)
    text = exc.summary + (f": {'; '.join(shown)}" if shown else "")
    text += f" (and {more} more)" if more > 0 else ""
    return " ".join(text.split())


# -- inputs -------------------------------------------------------------------------------------


def shot_inputs(
    record: records.ShotRecord, story: records.Story, media: MediaHasher
) -> dict[str, Any]:
    """Everything a component may read about one shot (the task's ``inputs``)."""
    refs = [
        {
            "key": key,
            "name": name,
            "tag": story.characters[key].tag,
            "images": [_ref_media(media, path) for path in story.characters[key].images],
        }
        for key, name in zip(record.character_keys, record.character_names, strict=False)
        if key in story.characters
    ]
    first = record.reference_images[0] if record.reference_images else None
    cast = [
        {
            "key": character.key,
            "name": character.name,
            "tag": character.tag,
            "description": character.prompt,
            "images": [_ref_media(media, path) for path in character.images],
        }
        for character in story.characters.values()
    ]
    return {
        "image_prompt": record.prompt,
        "shot_prompt": record.prompt,
        "current_image": media(str(first)) if first is not None else None,
        "character_refs": refs,
        "shot": {
            "story_id": record.group,
            "index": record.shot_index,
            "plot": record.plot,
            "scene": record.scene,
            "camera": record.camera,
            "script": record.script,
            "character_keys": list(record.character_keys),
            "character_names": list(record.character_names),
            "story_type": record.story_type,
            "language": record.language,
        },
        "characters": cast,
    }


def _ref_media(media: MediaHasher, path: Path) -> RefMedia:
    hashed = media(str(path))
    return RefMedia(path=hashed.path, sha256=hashed.sha256)


def project(component: Component, pool: Mapping[str, Any]) -> dict[str, Any]:
    """Exactly the inputs the component declared: nothing else reaches it (or its key)."""
    return {name: pool[name] for name in component.reads}


# -- pools ------------------------------------------------------------------------------------


def shot_pools(data: LoadedDataset, media: MediaHasher) -> dict[int, dict[str, Any]]:
    """Every shot's inputs (:func:`shot_inputs`), by record index."""
    by_id = {story.id: story for story in data.stories}
    return {r.index: shot_inputs(r, by_id[r.group], media) for r in data.records}


def apply_plans(
    pools: dict[int, dict[str, Any]], plans: Mapping[int, CallRecord | Failure]
) -> dict[int, Failure]:
    """Put each plan's image prompt into its shot's ``image_prompt``; the shots whose plan gives
    none, with the reason (they are not drawn)."""
    from omnistory_vistorybench.planning import plan_image_prompt

    blocked: dict[int, Failure] = {}
    for index, record in plans.items():
        prompt = plan_image_prompt(record)
        if isinstance(prompt, Failure):
            blocked[index] = prompt
        else:
            pools[index]["image_prompt"] = prompt
    return blocked


__all__ = [
    "DATASETS",
    "FIXTURE_DATASET",
    "LoadedDataset",
    "RefMedia",
    "ShotSystem",
    "apply_plans",
    "load_dataset",
    "project",
    "shot_inputs",
    "shot_pools",
]
