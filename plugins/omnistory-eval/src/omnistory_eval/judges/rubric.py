"""The four rubric criteria of each judge track and the JSON schemas built from them (App. E.3-E.4).

Every judge of a track returns exactly these four keys, each ``{"score": int 1-10, "rationale":
str}``.  The same keys drive local parsing, the repair prompt, the repair's structured decoding and
Gemma 4's constrained decoding.
"""

from __future__ import annotations

from typing import Any

from omnistory_core.builtin.omnistorybench import CRITERIA

#: the judge tracks, as the Omni-StoryBench task declares them
TRACKS: tuple[str, ...] = tuple(CRITERIA)

SCORE_MIN = 1
SCORE_MAX = 10


def criteria_for(track: str) -> tuple[str, ...]:
    """The four required keys of ``track``; a clear error for an unknown track."""
    try:
        return CRITERIA[track]
    except KeyError:
        raise ValueError(f"unknown judge track {track!r}; expected one of {TRACKS}") from None


def judge_json_schema(track: str) -> dict[str, Any]:
    """JSON Schema of a valid judge answer: the four keys, each exactly {score, rationale}."""
    item = {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "minimum": SCORE_MIN, "maximum": SCORE_MAX},
            "rationale": {"type": "string", "minLength": 1},
        },
        "required": ["score", "rationale"],
        "additionalProperties": False,
    }
    keys = criteria_for(track)
    return {
        "type": "object",
        "properties": {key: item for key in keys},
        "required": list(keys),
        "additionalProperties": False,
    }


def repair_json_schema(track: str) -> dict[str, Any]:
    """What the repair model may emit: the track's judge schema or ``{"unrecoverable": true}``."""
    unrecoverable = {
        "type": "object",
        "properties": {"unrecoverable": {"const": True}},
        "required": ["unrecoverable"],
        "additionalProperties": False,
    }
    return {"anyOf": [judge_json_schema(track), unrecoverable]}
