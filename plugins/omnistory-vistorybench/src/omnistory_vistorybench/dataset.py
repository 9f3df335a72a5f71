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
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from omnistory_core.api import DatasetError, Problem

log = logging.getLogger("omnistory")

DATASET_DIR = "ViStory"
STORY_FILE = "story.json"
IMAGE_DIR = "image"
LANGUAGES: tuple[str, ...] = ("en", "ch")
SPLITS: tuple[str, ...] = ("full", "lite")
#: the official Lite subset (``get_story_name_list(split="lite")``)
LITE_STORY_IDS: tuple[str, ...] = (
    "01", "08", "09", "15", "17", "19", "24", "27", "28", "29",
    "32", "41", "52", "53", "55", "57", "60", "64", "68", "79",
)  # fmt: skip
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
FINGERPRINT_VERSION = "vistory-dataset-fingerprint/v1"
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


def load_story(story_dir: str | Path, language: str = "en") -> Story:
    """Load one story folder (``<NN>/story.json`` + ``<NN>/image/``) in one language."""
    _check_choice("language", language, LANGUAGES)
    story_dir = Path(story_dir)
    path = story_dir / STORY_FILE
    data = read_story_json(path)
    problems = _structure_problems(str(path), data)
    if problems:
        raise DatasetError(f"malformed {path}", problems)
    story_id = story_dir.name
    characters = {
        key: _character(story_id, story_dir, key, raw, language)
        for key, raw in data.get("Characters", {}).items()
    }
    shots = tuple(
        shot
        for raw in data.get("Shots", [])
        if (shot := _shot(story_id, raw, language, characters)) is not None
    )
    if not shots:
        log.warning("ViStory story %s: no usable shot in %s", story_id, path)
    story_type = data.get("Story_type", {}).get(language, f"({language} type not defined)")
    return Story(story_id, story_type, characters, shots, language, story_dir)


def read_story_json(path: Path) -> dict[str, Any]:
    """Parse a ``story.json`` (``utf-8-sig``, as officially); DatasetError naming the file."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise DatasetError(
            f"cannot read {path}", [Problem(str(path), WHOLE_FILE, str(exc))]
        ) from exc
    except UnicodeDecodeError as exc:
        raise DatasetError(
            f"cannot read {path}", [Problem(str(path), WHOLE_FILE, f"not UTF-8: {exc}")]
        ) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"cannot parse {path}",
            [Problem(str(path), WHOLE_FILE, f"invalid JSON at line {exc.lineno}: {exc.msg}")],
        ) from exc
    if not isinstance(data, dict):
        raise DatasetError(
            f"malformed {path}",
            [Problem(str(path), WHOLE_FILE, f"top level is {type(data).__name__}, not an object")],
        )
    return data


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


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise DatasetError(f"ViStory {name} {value!r} is not one of {', '.join(allowed)}")


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


def _structure_problems(file: str, data: Mapping[str, Any]) -> list[Problem]:
    """Everything in a parsed story.json whose type is not the official one.

    Absent shot fields and absent languages are not problems (they are warnings at load); a
    wrong type is, because the official loader would crash on it or silently misread it.
    """
    problems: list[Problem] = []

    def bad(where: str, message: str) -> None:
        problems.append(Problem(file, where, message))

    story_type = data.get("Story_type", {})
    if not isinstance(story_type, dict):
        bad("Story_type", "must be an object {en, ch}")
    characters = data.get("Characters", {})
    if not isinstance(characters, dict):
        bad("Characters", "must be an object keyed by character")
        characters = {}
    for key, raw in characters.items():
        where = f"Characters.{key}"
        if not isinstance(raw, dict):
            bad(where, "must be an object")
            continue
        for name in ("name_en", "name_ch", "prompt_en", "prompt_ch", "tag"):
            if name in raw and not isinstance(raw[name], str):
                bad(f"{where}.{name}", "must be a string")
        count = raw.get("num_of_appearances", -1)
        if isinstance(count, bool) or not isinstance(count, int):
            bad(f"{where}.num_of_appearances", "must be an integer")
    shots = data.get("Shots", [])
    if not isinstance(shots, list):
        bad("Shots", "must be a list")
        shots = []
    seen: set[int] = set()
    for position, raw in enumerate(shots):
        where = f"Shots[{position}]"
        if not isinstance(raw, dict):
            bad(where, "must be an object")
            continue
        index = _shot_index(raw.get("index"))
        if index is None:
            bad(f"{where}.index", f"must be an integer, got {raw.get('index')!r}")
        elif index in seen:
            bad(f"{where}.index", f"index {index} appears twice")
        else:
            seen.add(index)
        for name in SHOT_FIELDS:
            if name not in raw:
                continue
            value = raw[name]
            if not isinstance(value, dict):
                bad(f"{where}.{name}", "must be an object {en, ch}")
                continue
            for lang, text in value.items():
                if name == CHARACTERS_FIELD:
                    if not (isinstance(text, list) and all(isinstance(t, str) for t in text)):
                        bad(f"{where}.{name}.{lang}", "must be a list of strings")
                elif not isinstance(text, str):
                    bad(f"{where}.{name}.{lang}", "must be a string")
    return problems


def _shot_index(value: Any) -> int | None:
    # the official evaluators look shots up by int(shot["index"]), so digit strings are accepted
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\d+", value):
        return int(value)
    return None


def _character(
    story_id: str, story_dir: Path, key: str, raw: Mapping[str, Any], language: str
) -> Character:
    tag = raw.get("tag", "")
    if tag not in CHARACTER_TAGS:
        log.warning("ViStory story %s: character %r has unknown tag %r", story_id, key, tag)
    images = _reference_images(story_dir / IMAGE_DIR / key)
    if not images:
        log.warning("ViStory story %s: character %r has no reference image", story_id, key)
    return Character(
        key=key,
        name=raw.get(f"name_{language}", ""),
        name_en=raw.get("name_en", ""),
        prompt=raw.get(f"prompt_{language}", ""),
        tag=tag,
        num_of_appearances=raw.get("num_of_appearances", -1),
        images=images,
    )


def _reference_images(folder: Path) -> tuple[Path, ...]:
    if not folder.is_dir():
        return ()
    found = [
        p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in REFERENCE_EXTENSIONS
    ]
    return tuple(sorted(found, key=lambda p: p.relative_to(folder).as_posix()))


def _shot(
    story_id: str, raw: Mapping[str, Any], language: str, characters: Mapping[str, Character]
) -> Shot | None:
    """One shot in ``language``, or ``None`` (with one warning) when it cannot be used.

    Where the official loader would put a placeholder string in place of the names list (and
    then zip the keys with its letters), the names come from the character library instead:
    each key's name in ``language``, else the key.  A shot whose ``Characters Appearing`` has
    no English key list is dropped, since its characters cannot be matched to the library.
    """
    index = _shot_index(raw["index"])
    assert index is not None  # checked by _structure_problems
    missing = [name for name in SHOT_FIELDS if name not in raw]
    if missing:
        log.warning(
            "ViStory story %s shot %s dropped: missing field(s) %s", story_id, index, missing
        )
        return None
    appearing = raw[CHARACTERS_FIELD]
    if KEY_LANGUAGE not in appearing:
        log.warning(
            "ViStory story %s shot %s dropped: field %r has no %r key list",
            story_id,
            index,
            CHARACTERS_FIELD,
            KEY_LANGUAGE,
        )
        return None
    lacking = [name for name in SHOT_FIELDS if language not in raw[name]]
    if lacking:
        log.warning(
            "ViStory story %s shot %s: field(s) %s have no %r text; using the official"
            " '(%s data missing)' placeholder",
            story_id,
            index,
            lacking,
            language,
            language,
        )
    texts = {attr: _localized(raw[name], language) for name, attr in TEXT_FIELDS.items()}
    listed_keys: list[str] = appearing[KEY_LANGUAGE]
    if language in appearing:
        listed_names: list[str] = appearing[language]
        if len(listed_names) != len(listed_keys):
            log.warning(
                "ViStory story %s shot %s: %d %r names for %d keys; pairing the first ones",
                story_id,
                index,
                len(listed_names),
                language,
                len(listed_keys),
            )
    else:
        listed_names = [_library_name(characters, key) for key in listed_keys]
    keys: list[str] = []
    names: list[str] = []
    undefined: list[str] = []
    for key, name in zip(listed_keys, listed_names, strict=False):
        defined = key if key in characters else key.strip()
        if defined not in characters:
            log.warning(
                "ViStory story %s shot %s: character %r not defined in Characters; skipped",
                story_id,
                index,
                key,
            )
            undefined.append(key)
            continue
        keys.append(defined)
        names.append(name)
    return Shot(
        story_id=story_id,
        index=index,
        character_keys=tuple(keys),
        character_names=tuple(names),
        undefined_keys=tuple(undefined),
        **texts,
    )


def _localized(value: Mapping[str, str], language: str) -> str:
    if language in value:
        return value[language]
    # the official placeholder embeds str() of the whole field object
    return f"({language} data missing) " + str(value)


def _library_name(characters: Mapping[str, Character], key: str) -> str:
    character = characters.get(key) or characters.get(key.strip())
    return (character.name if character else "") or key


__all__ = [
    "CHARACTER_TAGS",
    "LANGUAGES",
    "LITE_STORY_IDS",
    "SHOT_FIELDS",
    "SPLITS",
    "Character",
    "MergedPrompt",
    "Shot",
    "ShotRecord",
    "Story",
    "dataset_fingerprint",
    "fixture_root",
    "load_records",
    "load_stories",
    "load_story",
    "read_story_json",
    "resolve_dataset_dir",
    "shot_id",
    "shot_records",
    "story_ids",
    "story_prompt_merge",
]
