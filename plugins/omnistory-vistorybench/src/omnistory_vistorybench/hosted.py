"""The ViStoryBench form of a hosted image expert: the official adaptations' request per shot.

A hosted image expert (:class:`~omnistory_core.kit.hosted_images.HostedImageExpert`:
``nanobanana``, ``seedream``, ``gpt_image``, a plugin's own) draws a picture from a prompt,
reference images and the previous picture.  On Omni-StoryBench it reads a page; here it runs as
the official ViStoryBench adaptations of NanoBanana and Seedream4 run it (``data_process/
inference_custom/{nanobanana,Seedream}/run_custom.py``):

* the prompt is the shot's ``image_prompt`` (the merged prompt of ``story_prompt_merge``, or a
  planner's rewrite);
* the references are the **first** reference image of every onstage character, in the shot's
  order (characters without an image, or outside the story's library, are left out: the loader
  already warned);
* ``story_chain=true`` (the default): one cached call per story (``unit = "group"``), the shots
  in story order, each after the first also given the previous shot's output.  After a failed
  shot the next is given the latest shot that succeeded (``chain_after_failure=last_ok``,
  Seedream's rule) or no previous shot (``reset``, NanoBanana's); every shot's image or failure
  is its own;
* ``story_chain=false``: one independent call per shot, without a previous shot.

**Provider batches** (``batch=true``, an expert with a batch API: ``nanobanana``,
``gpt_image``).  Shot N of a story is drawn from shot N-1's output, so a story's shots cannot go
in one batch.  Batching goes *across stories, per shot index*: the stage's stories are one call
each as always, and :meth:`StoryChainForm.stories_batched` sends the first shot of every story in
one provider batch, then the second shot of every story (each chained on its own story's
previous output), and so on (``story_chain=false``: every shot of every story in one batch).
Every shot's request is exactly the one the synchronous path sends; the failure rules after a
failed shot are the same.  A shot whose batch has not ended within ``batch_wait_s`` is a
``batch_pending`` failure and so are the later shots of its story (they need its output); the
story's ended batches stay in the ledger, so the next run re-reads them, rebuilds the same
requests and polls the pending batch instead of submitting anything again.

The form is a subclass of the registered class (as the planners' forms of
:mod:`omnistory_vistorybench.planning` are): kind, name, version, parameters and plugin stay the
expert's; only ``reads``, ``unit`` and how a call is built change.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import Any, ClassVar

from omnistory_core.api import Component, Failure, ImageOutput, Media
from omnistory_core.kit.hosted_images import DrawRequest, HostedImageExpert
from omnistory_core.kit.image_batches import Drawn
from omnistory_core.kit.retry import map_bounded

#: what a shot's request is built from
STORY_READS: tuple[str, ...] = ("image_prompt", "character_refs")
#: the side of the stand-in the dry run counts for a previous shot not made yet (16:9)
ESTIMATE_PREVIOUS = (1024, 576)


def first_references(item: Mapping[str, Any]) -> tuple[Media, ...]:
    """The first reference image of each onstage character that has one, in shot order."""
    return tuple(ref["images"][0] for ref in item.get("character_refs") or () if ref.get("images"))


def shot_request(item: Mapping[str, Any], previous: Any = None) -> DrawRequest:
    """One shot's request: its image prompt, its characters' first references, the previous
    picture (None: none)."""
    prompt = item.get("image_prompt")
    return DrawRequest(
        prompt=prompt if isinstance(prompt, str) else "",
        references=first_references(item),
        previous=previous,
    )


def png_of(image: Any) -> bytes:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    return buf.getvalue()


@lru_cache(maxsize=1)
def _stand_in() -> bytes:
    from PIL import Image

    return png_of(Image.new("RGB", ESTIMATE_PREVIOUS, (255, 255, 255)))


class ShotForm:
    """``story_chain=false``: one call per shot, references only."""

    reads: ClassVar[tuple[str, ...]] = STORY_READS
    unit: ClassVar[str] = "item"

    def page_request(self, item: Mapping[str, Any]) -> DrawRequest:
        return shot_request(item)


class StoryChainForm:
    """``story_chain=true``: one call per story, each shot chained on the previous output."""

    reads: ClassVar[tuple[str, ...]] = STORY_READS
    unit: ClassVar[str] = "group"
    params: dict[str, Any]

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        self.load()  # type: ignore[attr-defined]
        if self.params.get("batch"):
            return self.stories_batched(items)
        return map_bounded(self.story, items, int(self.params["max_concurrency"]))

    def run_one(self, item: dict[str, Any]) -> list[Any]:
        return self.run_batch([item])[0]

    def story(self, item: Mapping[str, Any]) -> list[Any]:
        """``item``: ``{"items": [each shot's inputs, in story order]}``; one output per shot."""
        reset = self.params["chain_after_failure"] == "reset"
        previous: bytes | None = None
        outputs: list[Any] = []
        for shot in item["items"]:
            try:
                result = self.draw(shot_request(shot, previous))  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 - this shot fails alone; the chain goes on
                result = exc
            outputs.append(result)
            if isinstance(result, ImageOutput):
                previous = png_of(result.image)
            elif reset:
                previous = None
        return outputs

    def stories_batched(self, items: list[dict[str, Any]]) -> list[list[Any]]:
        """``batch=true``: one provider batch per shot index across the stories (see the module
        doc); one list of shot outputs per story, as :meth:`story` returns."""
        drawer = self.batch_drawer()  # type: ignore[attr-defined]
        reset = self.params["chain_after_failure"] == "reset"
        shots = [list(item["items"]) for item in items]
        drawn: list[list[Drawn]] = [[] for _ in shots]
        previous: list[bytes | None] = [None] * len(shots)
        for index in range(max(map(len, shots), default=0)):
            going = [s for s, story in enumerate(shots) if len(drawn[s]) == index < len(story)]
            requests = [shot_request(shots[s][index], previous[s]) for s in going]
            for s, shot in zip(going, drawer.draw(requests), strict=True):
                drawn[s].append(shot)
                if shot.waiting:  # the later shots need this one's output: they wait too
                    rest = Failure(
                        shot.result.category,
                        f"waiting for shot {index + 1} of the story: {shot.result.message}",
                    )
                    drawn[s] += [Drawn(rest) for _ in shots[s][index + 1 :]]
                elif isinstance(shot.result, ImageOutput):
                    previous[s] = png_of(shot.result.image)
                elif reset:
                    previous[s] = None
        drawer.settle(drawn)
        return [[d.result for d in story] for story in drawn]

    def requests_of(self, inputs: Mapping[str, Any]) -> list[DrawRequest]:
        """The dry run's requests of a story call: every shot after the first is counted with a
        blank 16:9 stand-in for the previous shot (the real one is not made yet)."""
        shots = list(inputs.get("items") or ())
        return [shot_request(s, _stand_in() if n else None) for n, s in enumerate(shots)]


def stage_usage(results: Mapping[int, Any]) -> dict[str, float]:
    """The numbers of the usage of the stage's distinct calls, summed (a hosted model's images,
    tokens and cost; a group call's usage counts once)."""
    total: dict[str, float] = {}
    seen: set[str] = set()
    for value in results.values():
        key = getattr(value, "key", None)
        if key is None or key in seen:
            continue
        seen.add(key)
        for name, number in (getattr(value, "usage", None) or {}).items():
            if isinstance(number, int | float) and not isinstance(number, bool):
                total[name] = total.get(name, 0) + number
    return total


def is_hosted(cls: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, HostedImageExpert)


def story_form(cls: type[Component], chain: bool) -> type[Component]:
    """The class that runs hosted expert ``cls`` on ViStoryBench shots."""
    return _with_form(StoryChainForm if chain else ShotForm, cls)


@cache
def _with_form(form: type, cls: type[Component]) -> type[Component]:
    name = f"Vistory{cls.__name__}{'Story' if form is StoryChainForm else 'Shot'}"
    return type(name, (form, cls), {"__module__": __name__, "__qualname__": name})


def build_hosted(cls: type[Component], spec: Mapping[str, Any], *, seed: int) -> Component:
    """Hosted expert ``cls`` with the config node ``spec``, in its ViStoryBench form."""
    params = {k: v for k, v in spec.items() if k not in ("name", "runner", "default_choice")}
    params.setdefault("seed", seed)
    declared = {p.name: p.default for p in cls.parameters or ()}
    chain = bool(params.get("story_chain", declared.get("story_chain", True)))
    return story_form(cls, chain)(**params)


__all__ = [
    "STORY_READS",
    "ShotForm",
    "StoryChainForm",
    "build_hosted",
    "first_references",
    "is_hosted",
    "shot_request",
    "stage_usage",
    "story_form",
]
