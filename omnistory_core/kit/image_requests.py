"""What a hosted image expert draws from and what it gets back: :class:`DrawRequest` (a prompt,
reference images in order, the previous picture), :class:`ImageReply` (one answer), and the
picture helpers every provider's request uses (JPEG re-encoding, sizes, decoding).  PIL is
imported only when a picture is read."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from omnistory_core.components import Media

#: what the previous picture may be: a file, or the bytes of an image made in this process
Picture = Media | bytes


@dataclass(frozen=True)
class DrawRequest:
    """What one picture is drawn from: the prompt, reference images in order, and the previous
    picture of the story (None: none)."""

    prompt: str
    references: tuple[Picture, ...] = ()
    previous: Picture | None = None


@dataclass
class ImageReply:
    """One answer: the image bytes (None: the answer holds none), the tokens the provider
    reported, and when there is no image why (``declined``: its content policy)."""

    data: bytes | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    message: str = ""
    declined: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@lru_cache(maxsize=64)
def _jpeg_of(data: bytes, quality: int) -> bytes:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        rgb = img.convert("RGB")
    buf = io.BytesIO()
    rgb.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def picture_bytes(picture: Picture) -> bytes:
    return picture if isinstance(picture, bytes) else picture.read_bytes()


def jpeg_bytes(picture: Picture, quality: int = 95) -> bytes:
    """``picture`` re-encoded as JPEG of ``quality`` from its RGB pixels (an alpha channel is
    dropped); the same input gives the same bytes (cached for the story's repeated references)."""
    return _jpeg_of(picture_bytes(picture), int(quality))


def image_size(picture: Picture) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(picture_bytes(picture))) as img:
        return img.size


def decode_image(data: bytes) -> Any:
    """The provider's image bytes as an RGB ``PIL.Image.Image`` (ValueError when unreadable)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            return img.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"the answer's image cannot be read: {exc}") from None


def input_pictures(request: DrawRequest) -> list[Picture]:
    """The request's images in the order every provider here sends them: the references, then
    the previous picture."""
    pictures: list[Picture] = list(request.references)
    if request.previous is not None:
        pictures.append(request.previous)
    return pictures


__all__ = [
    "DrawRequest",
    "ImageReply",
    "Picture",
    "decode_image",
    "image_size",
    "input_pictures",
    "jpeg_bytes",
    "picture_bytes",
]
