"""StoryDiffusion's prompts as ViStoryBench's adaptation builds them, as pure functions.

The official adapter (``DP/adapt2storydiffusion.py``) turns a story into the rows of the
StoryDiffusion app: a *general prompt* with one line ``[<key>] <description>`` per character of
the story, and one *shot line* per shot, ``<camera>; <plot>; <script>; <roles>; <scene>.``, whose
roles are ``[NC]`` for a shot with nobody onstage, else ``A and B<trigger>, A is [A] and B is
[B]``.  The app then (upstream ``utils/gradio_utils.py``) reads the general prompt into
``{"[key]": " description"}``, finds the characters of each line by their bracketed key,
replaces each by its description plus a space, and picks each character's *ID shot*: the first
line where it is the only character (``id_length`` = 1).  Those shots are drawn first and write
the character's attention bank; every other shot reads the banks of its characters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: the marker of a shot with nobody onstage; removed from the line before drawing
NO_CHARACTER = "[NC]"


@dataclass(frozen=True)
class StoryPlan:
    """What the app makes of a story: per line the prompt drawn and the characters present,
    the ID shot of each character, and the order the shots are drawn in."""

    prompts: tuple[str, ...]
    present: tuple[tuple[str, ...], ...]
    id_shots: Mapping[str, int]
    order: tuple[int, ...]
    #: characters present in some line that never appear alone (no ID shot, no bank)
    without_id: tuple[str, ...] = ()


def roles(names: Sequence[str], trigger: str = "") -> str:
    """The roles segment of a shot line (``trigger`` is ``" img"`` in the app's reference mode)."""
    if not names:
        return NO_CHARACTER
    together = " and ".join(names) + trigger
    described = " and ".join(f"{name} is [{name}]" for name in names)
    return f"{together}, {described}"


def shot_line(
    camera: str, plot: str, script: str, scene: str, names: Sequence[str], trigger: str = ""
) -> str:
    """One shot's line, mode ``plot_first`` of the adapter (``strip(", ")`` then ``strip()``)."""
    line = f"{camera}; {plot}; {script}; {roles(names, trigger)}; {scene}."
    return line.strip(", ").strip()


def general_prompt(characters: Sequence[tuple[str, str]]) -> str:
    """``[<key>] <description>`` per ``(key, description)``, one line each."""
    return "\n".join(f"[{key}] {description}" for key, description in characters)


def character_dict(general: str) -> dict[str, str]:
    """``{"[key]": " description"}`` from a general prompt: per line, the first ``[...]`` is the
    key and everything after it (cut at its last ``#``, when there is one) the description."""
    found: dict[str, str] = {}
    for line in general.splitlines():
        start, end = line.find("["), line.find("]")
        if start == -1 or end == -1:
            continue
        value = line[end + 1 :]
        if "#" in value:
            value = value.rpartition("#")[0]
        found.setdefault(line[start : end + 1], value)
    return found


def clean_line(line: str) -> str:
    """A shot line as the app draws it: ``[NC]`` removed, cut at its last ``#``."""
    line = line.replace(NO_CHARACTER, "")
    return line.rpartition("#")[0] if "#" in line else line


def plan_story(general: str, lines: Sequence[str]) -> StoryPlan:
    """The app's reading of a story (``id_length`` = 1).

    A character present in some line but never alone has no ID shot: the upstream app raises
    for such a story; here it is listed in ``without_id`` and the caller decides."""
    characters = character_dict(general)
    cleaned = [clean_line(line) for line in lines]
    present = tuple(tuple(key for key in characters if key in line) for line in cleaned)
    prompts = []
    for line, keys in zip(cleaned, present, strict=True):
        for key in keys:
            line = line.replace(key, characters[key] + " ")
        prompts.append(line)
    id_shots: dict[str, int] = {}
    without: list[str] = []
    for key in characters:
        appearances = [i for i, keys in enumerate(present) if key in keys]
        if not appearances:
            continue
        alone = [i for i in appearances if len(present[i]) == 1]
        if alone:
            id_shots[key] = alone[0]
        else:
            without.append(key)
    ids = list(dict.fromkeys(id_shots.values()))
    order = tuple(ids + [i for i in range(len(lines)) if i not in ids])
    return StoryPlan(tuple(prompts), present, id_shots, order, tuple(without))


__all__ = [
    "NO_CHARACTER",
    "StoryPlan",
    "character_dict",
    "clean_line",
    "general_prompt",
    "plan_story",
    "roles",
    "shot_line",
]
