"""Reference-conditioned image experts: an edit model (FLUX.1-Kontext) given one image per shot.

A Kontext-style expert reads ``image_prompt`` and ``current_image``: it edits the one image it is
given.  ViStoryBench gives a shot its characters' reference images, and the baselines here decide
which single image that is:

* ``image=first_ref`` (preset ``system=kontext_first_ref``): per shot, the first reference image
  of the first onstage character that has one (the task's ``current_image``).  A shot with no
  such character gets a **blank canvas** (white, ``canvas_width`` x ``canvas_height``).  Kontext
  cannot draw from text alone, and the other candidate, the previous shot, would make every shot
  depend on the story's order and on another call's output: the system would no longer be one
  independent, separately cached call per shot (that system is ``sequential``).  A blank canvas
  carries no identity, so the shot is drawn from its prompt alone, as close to text-only as an
  edit model comes.
* ``image=sequential`` (preset ``system=story_kontext``): one call per story (``unit =
  "group"``), the shots in story order; shot 1 is conditioned as ``first_ref`` conditions it,
  every later shot on the **previous shot's output**.  A shot the inner expert fails is recorded
  as that shot's failure and the chain goes on from the latest shot that succeeded (or, before
  any has, from the shot's own first onstage reference or the blank canvas): one bad shot costs
  its own image, not the rest of the story's.

Both wrap an *inner* expert, ``inner`` (default ``kontext``), built from the registry with every
other parameter of the config node (``image.model=... image.steps=...`` reach it unchanged), so
the wrapper checks nothing the inner does not and adds only how the conditioning image is chosen.
The inner must read ``current_image`` (the wrapper exists to choose it) and nothing beyond
``image_prompt``.  The cache key holds the wrapper's own parameters and the inner's name, version
and ``output_params`` (at the top level, beside them).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from omnistory_core.api import ConfigError, Failure, ImageExpert, Media, Param
from omnistory_core.kit.diffusion import exception_failure

#: the inputs the inner expert may read (``current_image`` is the one the wrapper chooses)
INNER_READS: frozenset[str] = frozenset({"image_prompt", "current_image"})
#: the blank canvas's colour (the Copy-Paste Baseline's background)
CANVAS_COLOUR: tuple[int, int, int] = (255, 255, 255)
#: the wrapper's own parameters (what ``plugins --params`` lists above the inner's); every other
#: key of its config node is the inner expert's
OWN_PARAMETERS: tuple[Param, ...] = (
    Param("inner", str, "kontext", "the image expert given the chosen image (reads current_image)"),
    Param(
        "canvas_width",
        (int, None),
        None,
        "width of the blank canvas; null: the inner's width, else 1024",
        ge=16,
    ),
    Param(
        "canvas_height",
        (int, None),
        None,
        "height of the blank canvas; null: the inner's height, else 1024",
        ge=16,
    ),
)
OWN_PARAMS: dict[str, Any] = {p.name: p.default for p in OWN_PARAMETERS}
#: the canvas side when neither ``canvas_*`` nor the inner's ``width``/``height`` give one
DEFAULT_CANVAS_SIDE = 1024


@dataclass(frozen=True)
class ImageMedia(Media):
    """An image held in memory (a blank canvas, the previous shot), as the inner expert reads a
    file: ``open_image`` and ``read_bytes`` work, ``sha256`` is the PNG bytes' digest."""

    data: bytes = b""

    def read_bytes(self) -> bytes:
        return self.data

    @classmethod
    def of(cls, image: Any) -> ImageMedia:
        """A PIL image (or PNG bytes) as media."""
        if isinstance(image, bytes | bytearray):
            data = bytes(image)
        else:
            buf = io.BytesIO()
            image.convert("RGB").save(buf, format="PNG")
            data = buf.getvalue()
        digest = hashlib.sha256(data).hexdigest()
        return cls(path=f"<memory:{digest[:12]}>", sha256=digest, data=data)


def blank_canvas(width: int, height: int) -> ImageMedia:
    """A white canvas of ``width`` x ``height`` pixels."""
    from PIL import Image

    return ImageMedia.of(Image.new("RGB", (width, height), CANVAS_COLOUR))


class ReferenceConditioned(ImageExpert):
    """Shared body of ``first_ref`` and ``sequential`` (not registered itself).

    Undeclared parameters (``parameters = None``): the node's keys other than
    :data:`OWN_PARAMS` and ``seed`` belong to the inner expert, which declares and checks them.
    """

    version = "1"
    baseline = True
    task = "vistorybench"
    reads: ClassVar[tuple[str, ...]] = ("image_prompt", "current_image")
    parameters = None
    # a wrapper: its own parameters, and the one naming the inner expert that takes the others
    # (``python -m omnistory_core plugins --params image=first_ref`` lists both)
    own_parameters = OWN_PARAMETERS
    inner_parameter = "inner"

    def __init__(self, **params: Any) -> None:
        own = {k: params.pop(k, default) for k, default in OWN_PARAMS.items()}
        super().__init__(**own, **params)
        self.inner = build_inner(str(own["inner"]), params, self.name)
        for side in ("canvas_width", "canvas_height"):
            value = own[side]
            if value is not None and (not isinstance(value, int) or value < 16):
                raise ConfigError(f"image={self.name}: {side} must be an integer >= 16 or null")
        width = own["canvas_width"] or params.get("width") or DEFAULT_CANVAS_SIDE
        height = own["canvas_height"] or params.get("height") or DEFAULT_CANVAS_SIDE
        self.canvas_size = (int(width), int(height))

    # -- identity: the inner's key, version and parameters are this one's ------------------------
    def output_params(self) -> dict[str, Any]:
        # the inner's parameters at the top level, as the config node holds them
        # (image.steps=...), so that each one visibly changes the key
        return {
            **self.inner.output_params(),
            "inner": self.inner.key(),
            "inner_version": self.inner.version,
            "canvas_width": self.canvas_size[0],
            "canvas_height": self.canvas_size[1],
        }

    @property
    def batch_size(self) -> int:
        return self.inner.batch_size

    # -- lifecycle: the inner's ------------------------------------------------------------------
    def preflight(self) -> None:
        check = getattr(self.inner, "preflight", None)
        if callable(check):
            check()

    def bind_store(self, root: Any) -> None:
        self.inner.bind_store(root)

    def load(self) -> None:
        self.inner.load()

    def unload(self) -> None:
        self.inner.unload()

    # -- conditioning ------------------------------------------------------------------------------
    def canvas(self) -> ImageMedia:
        return blank_canvas(*self.canvas_size)

    def first_reference(self, item: Mapping[str, Any]) -> Media:
        """The shot's first onstage reference (the task's ``current_image``), else the canvas."""
        current = item.get("current_image")
        return current if isinstance(current, Media) else self.canvas()

    def inner_item(self, item: Mapping[str, Any], image: Media) -> dict[str, Any]:
        pool = {"image_prompt": item.get("image_prompt"), "current_image": image}
        return {name: pool[name] for name in self.inner.reads}


def build_inner(name: str, params: Mapping[str, Any], owner: str) -> ImageExpert:
    """The inner image expert ``name`` with ``params``, from the installed plugins."""
    from omnistory_core.kit.jobs import load_plugins

    registry = load_plugins()
    if name not in registry.names("image"):
        installed = ", ".join(n for n in registry.names("image") if n not in WRAPPER_NAMES)
        raise ConfigError(
            f"image={owner}: image.inner={name} is not an installed image expert (installed:"
            f" {installed or 'none'})"
        )
    cls = registry.component("image", name)
    if cls.name in WRAPPER_NAMES or getattr(cls, "unit", "item") != "item":
        raise ConfigError(f"image={owner}: image.inner={name} must be a per-shot image expert")
    reads = set(cls.reads)
    if "current_image" not in reads or not reads <= INNER_READS:
        raise ConfigError(
            f"image={owner}: image.inner={name} reads {list(cls.reads)}; it must read"
            " current_image (the image this expert chooses) and at most image_prompt besides"
            " (e.g. image.inner=kontext)"
        )
    if cls.oracle:
        raise ConfigError(f"image={owner}: image.inner={name} is an oracle component")
    inner = cls(**params)
    assert isinstance(inner, ImageExpert)
    return inner


def _as_image(output: Any) -> Any:
    """An inner output (PIL image or PNG bytes) as a PIL image."""
    if isinstance(output, bytes | bytearray):
        from PIL import Image

        with Image.open(io.BytesIO(bytes(output))) as img:
            return img.convert("RGB")
    return output


class FirstReferenceImage(ReferenceConditioned):
    """``image=first_ref``: each shot edits its first onstage reference (else a blank canvas);
    one call per shot, batched as the inner expert batches."""

    name = "first_ref"
    description = (
        "an edit model (inner, default kontext) on the shot's first onstage reference image, a"
        " blank canvas when none"
    )

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        inner = [self.inner_item(item, self.first_reference(item)) for item in items]
        return self.inner.run_batch(inner)

    def run_one(self, item: dict[str, Any]) -> Any:
        return self.run_batch([item])[0]


class SequentialImage(ReferenceConditioned):
    """``image=sequential``: one call per story; shot 1 edits its first onstage reference (else
    a blank canvas), shot k > 1 the previous shot's output (after a failed shot: the latest
    shot that succeeded)."""

    name = "sequential"
    unit = "group"
    description = (
        "one call per story: an edit model (inner, default kontext) on the previous shot's"
        " output (shot 1: its first onstage reference)"
    )

    def run_one(self, item: dict[str, Any]) -> list[Any]:
        """``item`` is the story's call: ``{"items": [each shot's inputs, in story order]}``;
        one output (image or failure) per shot."""
        outputs: list[Any] = []
        previous: Media | None = None
        for shot in item["items"]:
            image = previous if previous is not None else self.first_reference(shot)
            try:
                [result] = self.inner.run_batch([self.inner_item(shot, image)])
            except Exception as exc:  # this shot fails alone; the chain goes on
                result = exception_failure(exc)
            if isinstance(result, Failure | BaseException) or result is None:
                outputs.append(result if result is not None else Failure("empty_output", "none"))
                continue
            picture = _as_image(result)
            outputs.append(picture)
            previous = ImageMedia.of(picture)
        return outputs


#: the experts of this module (registered through ``experts.IMAGE_EXPERTS``)
WRAPPERS: tuple[type[ReferenceConditioned], ...] = (FirstReferenceImage, SequentialImage)
WRAPPER_NAMES: frozenset[str] = frozenset(cls.name for cls in WRAPPERS)

__all__ = [
    "CANVAS_COLOUR",
    "FirstReferenceImage",
    "ImageMedia",
    "ReferenceConditioned",
    "SequentialImage",
    "WRAPPERS",
    "blank_canvas",
]
