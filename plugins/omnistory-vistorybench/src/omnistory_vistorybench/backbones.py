"""Backbones on ViStoryBench: a model that makes images natively draws each shot.

Omni-StoryBench's backbones (semi-orchestration T+I and any-to-any: ``emu3``, ``mmada``,
``omnidiffusion``, ``dynin``, ``hyperclova``, ``anygpt``, ``example_omni``, ``example_ti``, a
third party's) read a book page: ``current_image``, ``current_text``, ``metadata`` and
``conditions`` (:data:`~omnistory_core.components.EXAMPLE_INPUTS`).  Here each shot is given to
them as a page (:func:`page_view`), so the backbone runs unchanged (isolated in its own
environment too, ``backbone.runner.python``), one cached call per shot:

* ``current_image``: the first reference image of the first onstage character that has one (the
  image slot a page model has), else a blank white canvas (:data:`CANVAS_SIDE` pixels square);
* ``current_text`` and ``conditions.text_instruction``: the shot's merged prompt (what the
  benchmark gives a method: camera, plot, script, each onstage character with its description,
  setting);
* ``conditions``: also the setting as ``scene`` and the onstage characters by name;
* ``metadata``: the story type as genre and style, the onstage characters by name.

The backbone's image is the shot's image; its narration and speech are not scored by this task
and are ignored (not failures).  A backbone that makes no image (T+S) is refused before any
call, as is a backbone beside an image expert, planner or TTS expert.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from omnistory_core.api import ConfigError, Failure, Media
from omnistory_core.kit.jobs import CallRecord

#: the blank page of a shot with no onstage reference image
CANVAS_SIDE = 1024
#: the groups a backbone system of this task may not name besides the backbone
NOT_WITH_BACKBONE: dict[str, str] = {
    "image": "the backbone draws the shots itself",
    "planner": "the backbone reads the shot itself",
    "tts": "ViStoryBench makes no speech",
}


def backbone_spec(config: Mapping[str, Any], registry: Any) -> dict[str, Any] | None:
    """The backbone node of a backbone system (None: the job has no backbone), or the one-line
    :class:`ConfigError` of a configuration that cannot work here."""
    from omnistory_core.kit.jobs import chosen, explicit

    node = config.get("backbone")
    if not chosen(node):
        return None
    name = str(node["name"])
    cls = registry.component("backbone", name)
    produces = frozenset(getattr(cls, "produces", ()) or ())
    if "image" not in produces:
        raise ConfigError(
            f"backbone={name} makes {sorted(produces)} and no image: task vistorybench scores"
            " images only; choose a backbone that makes images (T+I or any-to-any) or"
            " image=NAME"
        )
    for group, why in NOT_WITH_BACKBONE.items():
        other = config.get(group)
        if explicit(other):
            raise ConfigError(
                f"{group}={other['name']} cannot run beside backbone={name} on task"
                f" vistorybench: {why}; drop {group}=..."
            )
    return dict(node)


def paradigm_of(cls: type) -> str:
    produces = frozenset(getattr(cls, "produces", ()) or ())
    return "any-to-any" if {"text", "image", "speech"} <= produces else "semi-orchestration (T+I)"


def blank_canvas() -> Media:
    """A white PNG of :data:`CANVAS_SIDE` pixels, as a file (a worker in another environment
    reads media by path); the same bytes, so the same cache key, everywhere."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (CANVAS_SIDE, CANVAS_SIDE), (255, 255, 255)).save(buf, format="PNG")
    data = buf.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    path = Path(tempfile.gettempdir()) / f"omnistory-vistory-canvas-{digest[:16]}.png"
    if not path.is_file():
        part = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        part.write_bytes(data)
        os.replace(part, path)
    return Media(path=str(path), sha256=digest)


def page_view(pool: Mapping[str, Any], canvas: Media) -> dict[str, Any]:
    """A shot's inputs as the page a backbone reads (see the module docstring), beside the
    shot's own inputs."""
    shot = dict(pool.get("shot") or {})
    merged = str(pool.get("shot_prompt") or "")
    names = [str(ref.get("name") or ref.get("key")) for ref in pool.get("character_refs") or ()]
    image = pool.get("current_image")
    kind = str(shot.get("story_type") or "")
    return {
        **pool,
        "current_image": image if isinstance(image, Media) else canvas,
        "current_text": merged,
        "metadata": {
            "genre": kind,
            "style": kind,
            "topic": "",
            "characters": [{"name": n} for n in names],
        },
        "conditions": {
            "characters": [{"name": n, "visibility": "on stage"} for n in names],
            "scene": str(shot.get("scene") or ""),
            "text_instruction": merged,
        },
    }


def page_pools(pools: Mapping[int, Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    canvas = blank_canvas()
    return {index: page_view(pool, canvas) for index, pool in pools.items()}


def shot_images(
    results: Mapping[int, CallRecord | Failure],
) -> dict[int, CallRecord | Failure]:
    """The backbone's records as the shots' image records: its image blob, or the failure of its
    image (its text and speech are not this task's)."""
    out: dict[int, CallRecord | Failure] = {}
    for index, value in results.items():
        if not isinstance(value, CallRecord) or value.status != "ok":
            out[index] = value
            continue
        image = value.output.get("image")
        if isinstance(image, dict) and image.get("blob"):
            out[index] = replace(value, output=dict(image))
            continue
        failure = (value.output.get("failures") or {}).get("image")
        out[index] = Failure.from_dict(
            failure or {"category": "backbone_no_image", "message": f"{value.component}: no image"}
        )
    return out


__all__ = [
    "CANVAS_SIDE",
    "backbone_spec",
    "blank_canvas",
    "page_pools",
    "page_view",
    "paradigm_of",
    "shot_images",
]
