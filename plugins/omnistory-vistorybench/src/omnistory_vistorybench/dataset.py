"""The ViStory dataset in its official on-disk layout, its two splits and two languages.

Layout (the Hugging Face release ``ViStoryBench/ViStoryBench``, folder renamed ``ViStory``)::

    <root>/ViStory/<NN>/story.json
    <root>/ViStory/<NN>/image/<CharacterKey>/00.jpg ...

``root`` may also be the ``ViStory`` folder itself.  The loader behaves like the official
``StoryDataset`` (``vistorybench/dataset_loader/dataset_load.py``) except where a docstring below
says otherwise:

* ``story.json`` is read as ``utf-8-sig``; a file that cannot be read or parsed, or whose
  structure is not the official one, raises :class:`~omnistory_core.data.errors.DatasetError`
  naming the file, before any story is returned.
* A shot lacking one of the five shot fields is dropped with one warning naming the story, the
  shot index and the missing field(s).
* A shot text field lacking the requested language becomes the official placeholder
  ``f"({language} data missing) " + str(field_value)`` (``field_value`` is the whole
  ``{lang: text}`` object, so the placeholder embeds its Python ``repr``), with one warning per
  shot.  Character names lacking the language come from the character library instead (see
  :func:`_shot`).
* A character key listed in a shot but not defined under ``Characters`` is skipped with a warning
  (the official code skips it when merging the prompt; here it is skipped once, at load, and kept
  apart in :attr:`Shot.undefined_keys` because the official OCCM still counts it).

Everything is logged through ``logging.getLogger("omnistory")``, one line per warning.  Nothing
here writes to disk.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from omnistory_core.api import DatasetError, Problem
from omnistory_vistorybench.records import (
    LANGUAGES,
    STORY_FILE,
    WHOLE_FILE,
    MergedPrompt,
    Shot,
    ShotRecord,
    Story,
    _check_choice,
)
from omnistory_vistorybench.story_json import load_story

log = logging.getLogger("omnistory")

DATASET_DIR = "ViStory"
SPLITS: tuple[str, ...] = ("full", "lite")
#: the official Lite subset (``get_story_name_list(split="lite")``)
LITE_STORY_IDS: tuple[str, ...] = (
    "01", "08", "09", "15", "17", "19", "24", "27", "28", "29",
    "32", "41", "52", "53", "55", "57", "60", "64", "68", "79",
)  # fmt: skip
FINGERPRINT_VERSION = "vistory-dataset-fingerprint/v1"


def fixture_root() -> Path:
    """The bundled offline fixture (``ViStory/`` and an ``outputs/`` tree), see its README."""
    return Path(__file__).resolve().parent / "fixture"


def resolve_dataset_dir(root: str | Path) -> Path:
    """The ``ViStory`` folder under ``root``, or ``root`` itself when it holds the stories."""
    root = Path(root)
    if (root / DATASET_DIR).is_dir():
        return root / DATASET_DIR
    if root.is_dir() and any((p / STORY_FILE).is_file() for p in _digit_dirs(root)):
        return root
    raise DatasetError(
        f"no ViStory dataset at {root}: expected {root / DATASET_DIR}/<NN>/{STORY_FILE}"
        f" or {root}/<NN>/{STORY_FILE}"
    )


def story_ids(root: str | Path, split: str = "full") -> list[str]:
    """The story ids of a split, by number: ``full`` = every digit-named folder, ``lite`` = those
    of :data:`LITE_STORY_IDS` that exist."""
    _check_choice("split", split, SPLITS)
    ids = sorted((p.name for p in _digit_dirs(resolve_dataset_dir(root))), key=int)
    if split == "lite":
        return [i for i in ids if i in LITE_STORY_IDS]
    return ids


def load_stories(
    root: str | Path,
    *,
    split: str = "full",
    language: str = "en",
    stories: Sequence[str | int] | None = None,
) -> list[Story]:
    """Load a split in one language; ``stories`` narrows it to those ids (an int ``1`` is ``"01"``).

    Every ``story.json`` is parsed before any story is returned, so a bad file fails the whole
    load with a :class:`DatasetError` naming it.
    """
    _check_choice("language", language, LANGUAGES)
    directory = resolve_dataset_dir(root)
    ids = story_ids(directory, split)
    if stories is not None:
        wanted = [_story_key(s) for s in stories]
        unknown = [s for s in wanted if s not in ids]
        if unknown:
            raise DatasetError(
                f"stories {unknown} are not in the {split} split of {directory}; it has {ids}"
            )
        ids = [i for i in ids if i in wanted]
    return [load_story(directory / story_id, language) for story_id in ids]


def shot_records(stories: Iterable[Story]) -> list[ShotRecord]:
    """One flat record per shot, in canonical order (the order of ``stories``, then file order)."""
    records: list[ShotRecord] = []
    for story in stories:
        for shot in story.shots:
            merged = story_prompt_merge(shot, story)
            records.append(
                ShotRecord(
                    id=shot.id,
                    group=story.id,
                    index=len(records),
                    shot_index=shot.index,
                    language=story.language,
                    story_type=story.story_type,
                    plot=shot.plot,
                    scene=shot.scene,
                    camera=shot.camera,
                    script=shot.script,
                    character_keys=shot.character_keys,
                    character_names=shot.character_names,
                    prompt=merged.prompt,
                    reference_images=merged.images,
                )
            )
    return records


def load_records(spec: Mapping[str, Any]) -> list[ShotRecord]:
    """The shot records a ``dataset`` config describes: ``root`` (required), ``split``
    (``full``/``lite``, default ``full``), ``language`` (``en``/``ch``, default ``en``) and
    ``stories`` (ids, optional).  Other keys are ignored."""
    root = spec.get("root")
    if not root:
        raise DatasetError(
            "dataset.root is not set: point it at a folder holding ViStory/<NN>/story.json"
        )
    stories = spec.get("stories")
    loaded = load_stories(
        root,
        split=str(spec.get("split") or "full"),
        language=str(spec.get("language") or "en"),
        stories=list(stories) if stories is not None else None,
    )
    return shot_records(loaded)


def story_prompt_merge(shot: Shot, story: Story) -> MergedPrompt:
    """The official method-facing prompt of a shot and the first reference of each character.

    ``"{camera};{plot};{script};{descriptions};{scene};"`` where ``descriptions`` is
    ``"<name> is <prompt>"`` per onstage character joined by ``";"`` (empty with no character,
    which leaves ``";;"`` as officially).  A key the story does not define is skipped with a
    warning.  Unlike the official code, which fails on ``images[0]``, a character without any
    reference image gives no image (with a warning) but keeps its description.
    """
    descriptions: list[str] = []
    images: list[Path] = []
    for key, name in zip(shot.character_keys, shot.character_names, strict=False):
        character = story.characters.get(key)
        if character is None:
            log.warning(
                "ViStory story %s shot %s: character %r not defined", story.id, shot.index, key
            )
            continue
        descriptions.append(f"{name} is {character.prompt}")
        if character.images:
            images.append(character.images[0])
        else:
            log.warning(
                "ViStory story %s shot %s: character %r has no reference image",
                story.id,
                shot.index,
                key,
            )
    prompt = f"{shot.camera};{shot.plot};{shot.script};{';'.join(descriptions)};{shot.scene};"
    return MergedPrompt(prompt, tuple(images))


def dataset_fingerprint(stories: Iterable[Story]) -> str:
    """SHA-256 (hex) over each story's ``story.json`` bytes and reference image bytes.

    Stories by number, then ``story.json``, then the references sorted by their path relative to
    the story folder; those relative paths are hashed with the bytes, absolute paths are not (the
    same data fingerprints the same anywhere).  The language and split are not part of it: they
    select from the same bytes.
    """
    digest = hashlib.sha256(FINGERPRINT_VERSION.encode())
    unique = {story.id: story for story in stories}
    for story_id in sorted(unique, key=_story_sort_key):
        story = unique[story_id]
        images = {p for c in story.characters.values() for p in c.images}
        relative = sorted(p.relative_to(story.path).as_posix() for p in images)
        for name in (STORY_FILE, *relative):
            file_digest = _file_sha256(story.path / name)
            digest.update(f"{story_id}/{name}\0{file_digest}\n".encode())
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------


def _digit_dirs(directory: Path) -> list[Path]:
    # str.isdigit alone accepts non-ASCII digits such as "²", which int() then rejects
    return [p for p in directory.iterdir() if p.is_dir() and p.name.isascii() and p.name.isdigit()]


def _story_key(story: str | int) -> str:
    return f"{story:02d}" if isinstance(story, int) else str(story)


def _story_sort_key(story_id: str) -> tuple[int, str]:
    return (int(story_id), story_id) if story_id.isdigit() else (-1, story_id)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise DatasetError(
            "cannot fingerprint the ViStory dataset", [Problem(str(path), WHOLE_FILE, str(exc))]
        ) from exc
    return digest.hexdigest()


__all__ = [
    "LITE_STORY_IDS",
    "SPLITS",
    "dataset_fingerprint",
    "fixture_root",
    "load_records",
    "load_stories",
    "resolve_dataset_dir",
    "shot_records",
    "story_ids",
    "story_prompt_merge",
]
