"""How ViStoryBench's CharaConsist script (``IC/CharaConsist/gen-mix.py``) reads a story, as pure
functions.

Each shot's prompt has three segments, ``bg + " " + fg + " " + act``: the setting (the plot when
there is none), the description of the story's *primary character*, and the static shot
description (the plot when there is none) followed by ``perspective: <camera>``.  The primary
character is the most frequent onstage character of the story (ties: alphabetical), or the
first character of the cast when nobody is ever onstage; its description is used for every shot,
also where it is absent.  The *ID shot*, the first shot with the primary character (else the
first shot), is drawn first; the others follow in story order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Segments:
    """One shot's three prompt segments."""

    bg: str
    fg: str
    act: str

    @property
    def background(self) -> str:
        """The background part as its token length is measured: ``bg + " "``."""
        return self.bg + " "

    @property
    def prompt(self) -> str:
        return self.bg + " " + self.fg + " " + self.act


def primary_character(
    shots: Sequence[Sequence[str]], cast: Sequence[str], chosen: str | None = None
) -> str | None:
    """The primary character's key: ``chosen`` when given, else the most frequent key over the
    shots' onstage lists (ties broken alphabetically), else the cast's first, else None."""
    if chosen:
        return chosen
    counts = Counter(key for keys in shots for key in keys)
    if not counts:
        return cast[0] if cast else None
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


def segments(shot: Mapping[str, str], fg: str) -> Segments:
    """The three segments of ``shot`` (its ``scene``, ``plot``, ``script``, ``camera``)."""
    bg = shot.get("scene") or shot.get("plot") or ""
    act = shot.get("script") or shot.get("plot") or ""
    perspective = (shot.get("camera") or "").strip()
    if perspective:
        act = act.rstrip() + f" perspective: {perspective}"
    return Segments(bg, fg or "", act)


def drawing_order(shots: Sequence[Sequence[str]], primary: str | None) -> list[int]:
    """The ID shot (first with ``primary``, else the first shot) then the others in order."""
    first = next((i for i, keys in enumerate(shots) if primary and primary in keys), 0)
    return [first] + [i for i in range(len(shots)) if i != first]


__all__ = ["Segments", "drawing_order", "primary_character", "segments"]
