"""Message rendering shared by every VLM planner.

One :class:`PlannerRequest` (system text, user text, page image) is built per example and then
written in each wire format: OpenAI-style chat messages with the image as a base64 ``data:`` URL
(OpenAI and every vLLM server), or Anthropic content blocks with a base64 image source.  Images are
sent inline, never as file paths or URLs, so a remote API and a local vLLM server without
``--allowed-local-media-path`` receive exactly the same bytes.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.components import Media
from omnistory_core.kit.planning.prompts import SYSTEM_PROMPT, PromptVariant, render_user_text

#: PIL format name -> MIME type, for the formats both OpenAI and Anthropic accept as they are
PASSTHROUGH_FORMATS = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "WEBP": "image/webp",
    "GIF": "image/gif",
}


@dataclass(frozen=True)
class EncodedImage:
    """Image bytes ready to send, with their MIME type."""

    data: bytes
    media_type: str

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.base64()}"


def encode_image(image: Media | str | Path, max_side: int | None = None) -> EncodedImage:
    """Read a page image for sending.

    The original bytes are kept when the format is one every API accepts and no side exceeds
    ``max_side``; anything else is re-encoded as PNG (downscaled to ``max_side`` if given), so the
    same input always yields the same bytes.  Raises ``ValueError`` naming the file when it is
    missing or not an image.
    """
    from PIL import Image, UnidentifiedImageError

    path = Path(image.path if isinstance(image, Media) else image)
    try:
        data = path.read_bytes()
        with Image.open(io.BytesIO(data)) as img:
            fmt = (img.format or "").upper()
            size = img.size
            too_big = max_side is not None and max(size) > int(max_side)
            if fmt in PASSTHROUGH_FORMATS and not too_big:
                return EncodedImage(data, PASSTHROUGH_FORMATS[fmt])
            converted = img.convert("RGBA" if "A" in img.getbands() else "RGB")
    except (OSError, UnidentifiedImageError) as exc:
        raise ValueError(f"planner input image {path}: cannot be read as an image ({exc})") from exc
    if too_big and max_side is not None:
        scale = int(max_side) / max(size)
        new_size = (max(1, round(size[0] * scale)), max(1, round(size[1] * scale)))
        converted = converted.resize(new_size, Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    converted.save(buf, format="PNG")
    return EncodedImage(buf.getvalue(), "image/png")


@dataclass(frozen=True)
class PlannerRequest:
    """What every planner sends for one example, before wire formatting."""

    system: str
    text: str
    image: EncodedImage


def build_request(
    item: dict[str, Any],
    variant: PromptVariant,
    *,
    target_chars: int | None = None,
    image_max_side: int | None = None,
) -> PlannerRequest:
    """Build the request for one planner item (``current_image``, ``current_text``,
    ``metadata``, ``conditions``)."""
    if "current_image" not in item or item["current_image"] is None:
        raise ValueError("planner item has no current_image")
    return PlannerRequest(
        system=SYSTEM_PROMPT,
        text=render_user_text(item, variant, target_chars),
        image=encode_image(item["current_image"], image_max_side),
    )


def openai_chat_messages(
    request: PlannerRequest, *, image_detail: str | None = None
) -> list[dict[str, Any]]:
    """Chat Completions messages: a system message, then the image part and the text part."""
    image_url: dict[str, Any] = {"url": request.image.data_url()}
    if image_detail:
        image_url["detail"] = image_detail
    return [
        {"role": "system", "content": request.system},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": image_url},
                {"type": "text", "text": request.text},
            ],
        },
    ]


def anthropic_messages(request: PlannerRequest) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` for the Anthropic Messages API (image block before the text)."""
    content = [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": request.image.media_type,
                "data": request.image.base64(),
            },
        },
        {"type": "text", "text": request.text},
    ]
    return request.system, [{"role": "user", "content": content}]


__all__ = [
    "EncodedImage",
    "PASSTHROUGH_FORMATS",
    "PlannerRequest",
    "anthropic_messages",
    "build_request",
    "encode_image",
    "openai_chat_messages",
]
