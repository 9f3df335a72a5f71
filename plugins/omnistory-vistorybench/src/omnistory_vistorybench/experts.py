"""ViStoryBench's own image experts: the official Copy-Paste Baseline (and the registration of the
reference-conditioned experts of :mod:`omnistory_vistorybench.systems`).

The paper's baseline is not a model: it pastes the onstage characters' reference images into the
shot.  :class:`CopyPasteImage` makes that image deterministically (no randomness, no model), so it
scores as high as copying can on character and style consistency and as low as ignoring the text
can on prompt alignment: the yardstick every method is read against.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from omnistory_core.api import ImageExpert, Media, Param
from omnistory_vistorybench.systems import WRAPPERS

#: the canvas colour: a blank shot (no character onstage) is this colour alone
BACKGROUND: tuple[int, int, int] = (255, 255, 255)


class CopyPasteImage(ImageExpert):
    """The Copy-Paste Baseline: the first reference image of each onstage character, side by side.

    The canvas is ``size`` x ``size``; it is split into one equal-width column per onstage
    character (in the shot's order) and each reference is scaled, aspect ratio kept, to fit its
    column and centred there.  A shot with no character onstage is a blank (white) canvas.  A
    character without any reference image is left out (the loader already warned about it).
    """

    name = "copy_paste"
    version = "1"
    baseline = True
    task = "vistorybench"
    reads = ("character_refs",)
    description = "ViStoryBench's Copy-Paste Baseline: onstage references stitched side by side"
    parameters = (Param("size", int, 512, "side of the square output image in pixels", ge=16),)

    def run_one(self, item: dict[str, Any]) -> Any:
        images = first_references(item["character_refs"])
        return stitch(images, int(self.params["size"]))


def first_references(character_refs: Sequence[Mapping[str, Any]]) -> list[Media]:
    """The first reference image of each onstage character that has one, in shot order."""
    return [ref["images"][0] for ref in character_refs if ref.get("images")]


def stitch(images: Sequence[Media], size: int) -> Any:  # -> PIL.Image.Image
    """``images`` pasted side by side, each fitted into its column of a ``size`` square."""
    from PIL import Image

    canvas = Image.new("RGB", (size, size), BACKGROUND)
    if not images:
        return canvas
    # integer column edges, so that every pixel column belongs to exactly one character
    edges = [round(i * size / len(images)) for i in range(len(images) + 1)]
    for media, left, right in zip(images, edges, edges[1:], strict=False):
        picture = media.open_image()
        width = max(1, right - left)
        scale = min(width / picture.width, size / picture.height)
        fitted = picture.resize(
            (max(1, round(picture.width * scale)), max(1, round(picture.height * scale))),
            Image.Resampling.LANCZOS,
        )
        x = left + (width - fitted.width) // 2
        y = (size - fitted.height) // 2
        canvas.paste(fitted, (x, y))
    return canvas


#: copy_paste, and the edit models given one reference image per shot (first_ref, sequential)
IMAGE_EXPERTS: tuple[type[ImageExpert], ...] = (CopyPasteImage, *WRAPPERS)

__all__ = ["BACKGROUND", "IMAGE_EXPERTS", "CopyPasteImage", "first_references", "stitch"]
