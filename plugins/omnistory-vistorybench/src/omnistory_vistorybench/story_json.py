"""``story.json`` read as the official loader reads it (see :mod:`.dataset` for the rules):
its structure checked (every problem named by file and field before any story is returned), its
shots and characters in the requested language, with the official placeholders and warnings.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omnistory_core.api import DatasetError, Problem
from omnistory_vistorybench.records import (
    CHARACTER_TAGS,
    CHARACTERS_FIELD,
    IMAGE_DIR,
    KEY_LANGUAGE,
    LANGUAGES,
    REFERENCE_EXTENSIONS,
    SHOT_FIELDS,
    STORY_FILE,
    TEXT_FIELDS,
    WHOLE_FILE,
    Character,
    Shot,
    Story,
    _check_choice,
)

log = logging.getLogger("omnistory")


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


__all__ = ["load_story", "read_story_json"]
