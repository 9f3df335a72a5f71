"""The ViStory dataset's records: a character, a shot, a story (as loaded in one language) and
the shot record the task runs on, plus the official merged prompt's parts.  Plain frozen
dataclasses, below the parsing of ``story.json`` (:mod:`.story_json`) and the dataset
(:mod:`.dataset`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from omnistory_core.api import DatasetError

STORY_FILE = "story.json"
IMAGE_DIR = "image"
LANGUAGES: tuple[str, ...] = ("en", "ch")
CHARACTER_TAGS: tuple[str, ...] = ("realistic_human", "unrealistic_human", "non_human")
REFERENCE_EXTENSIONS: tuple[str, ...] = (".png", ".jpg", ".jpeg")
CHARACTERS_FIELD = "Characters Appearing"
#: the five per-shot fields of ``story.json`` and the :class:`Shot` text attribute each one fills
TEXT_FIELDS: Mapping[str, str] = {
    "Plot Correspondence": "plot",
    "Setting Description": "scene",
    "Shot Perspective Design": "camera",
    "Static Shot Description": "script",
}
SHOT_FIELDS: tuple[str, ...] = (*TEXT_FIELDS, CHARACTERS_FIELD)
#: the language the shot's character keys are listed in, whatever language is loaded
KEY_LANGUAGE = "en"
WHOLE_FILE = "(file)"


@dataclass(frozen=True)
class Character:
    """One character of a story.

    ``key`` is the ``Characters`` key: the name shots list in English and the reference folder
    ``image/<key>/``.  ``name`` and ``prompt`` are in the loaded language (``""`` when the
    language is absent, as officially); ``name_en`` is what the official loader calls ``key``.
    ``images`` are the ``.png/.jpg/.jpeg`` files under the reference folder, sorted by their path
    relative to it.
    """

    key: str
    name: str
    name_en: str
    prompt: str
    tag: str
    num_of_appearances: int = -1
    images: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Shot:
    """One shot.  ``index`` is the ``story.json`` index (1-based in the official data).

    ``character_keys`` and ``character_names`` are aligned (the official code zips them);
    ``undefined_keys`` are keys the shot lists that the story does not define.
    """

    story_id: str
    index: int
    plot: str
    scene: str
    camera: str
    script: str
    character_keys: tuple[str, ...] = ()
    character_names: tuple[str, ...] = ()
    undefined_keys: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return shot_id(self.story_id, self.index)


@dataclass(frozen=True)
class Story:
    """One story in one language: its type, characters (by key) and shots in file order."""

    id: str
    story_type: str
    characters: Mapping[str, Character]
    shots: tuple[Shot, ...]
    language: str
    path: Path

    @property
    def type(self) -> str:
        return self.story_type

    @property
    def story_json(self) -> Path:
        return self.path / STORY_FILE

    def shot(self, index: int) -> Shot:
        """The shot whose ``story.json`` index is ``index``."""
        for shot in self.shots:
            if shot.index == index:
                return shot
        raise KeyError(f"story {self.id} has no shot {index}")


@dataclass(frozen=True)
class ShotRecord:
    """One shot as a flat task record.

    ``id`` is ``f"{story_id}_{shot_index:02d}"`` (``"01_03"``), ``group`` the story id, ``index``
    the 0-based position in the canonical order (stories by number, shots in file order);
    ``prompt`` and ``reference_images`` are :func:`story_prompt_merge`'s.
    """

    id: str
    group: str
    index: int
    shot_index: int
    language: str
    story_type: str
    plot: str
    scene: str
    camera: str
    script: str
    character_keys: tuple[str, ...]
    character_names: tuple[str, ...]
    prompt: str
    reference_images: tuple[Path, ...] = field(default=())


class MergedPrompt(NamedTuple):
    """What a method is given for one shot: the merged prompt and one image per character."""

    prompt: str
    images: tuple[Path, ...]


def shot_id(story_id: str, index: int) -> str:
    """The record id of a shot: ``"01_03"`` for shot 3 of story 01."""
    return f"{story_id}_{index:02d}"


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise DatasetError(f"ViStory {name} {value!r} is not one of {', '.join(allowed)}")


__all__ = [
    "CHARACTER_TAGS",
    "CHARACTERS_FIELD",
    "LANGUAGES",
    "SHOT_FIELDS",
    "TEXT_FIELDS",
    "Character",
    "MergedPrompt",
    "Shot",
    "ShotRecord",
    "Story",
    "shot_id",
]
