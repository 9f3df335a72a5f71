"""Media in and out: the current page as an image URL, downloads of the generated media, checks.

Generated media come back as signed URLs of the server's object storage; they are fetched without
the API key (a signed URL carries its own authorisation, and some stores refuse a request that has
both) and checked: the image must decode, the speech must be a readable waveform.
"""

from __future__ import annotations

import io
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from omnistory_core.api import Audio, Media
from omnistory_core.kit.planning.messages import encode_image
from omnistory_hyperclova.prompts import redact_url


class MediaError(Exception):
    """A generated medium could not be fetched or read; ``category`` is a Failure category."""

    def __init__(self, message: str, category: str = "model_error"):
        super().__init__(message)
        self.category = category


def image_url_for(media: Media, transport: str, http_root: str | None, base_url: str | None) -> str:
    """How the current page reaches the server.

    ``data_url``: inline as a base64 ``data:`` URL (the original bytes when the format is PNG,
    JPEG, WebP or GIF).  ``http``: ``base_url`` + the path of the image relative to ``http_root``,
    a directory that a web server reachable from the model's encoders serves at ``base_url``.
    Raises ``ValueError`` naming the file when it cannot be sent.
    """
    if transport == "data_url":
        return encode_image(media).data_url()
    root = Path(str(http_root)).expanduser().resolve()
    path = Path(media.path).resolve()
    try:
        relative = path.relative_to(root)
    except ValueError:
        raise ValueError(
            f"current image {media.path} is not under image_http_root {root}: with "
            "image_transport=http the page images must lie inside the served directory"
        ) from None
    if not path.is_file():
        raise ValueError(f"current image {media.path} does not exist")
    return str(base_url).rstrip("/") + "/" + quote(relative.as_posix(), safe="/")


class _RedactSignedUrls(logging.Filter):
    """Cuts query strings (where signed URLs keep their signature) out of the HTTP client's
    request log lines, so logs never hold a usable signed URL."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(
                redact_url(str(arg)) if "?" in str(arg) and "://" in str(arg) else arg
                for arg in record.args
            )
        return True


_LOG_FILTER = _RedactSignedUrls()


def install_log_filter() -> None:
    """Once per process, on the loggers of the HTTP clients (``httpx2``; ``httpx`` too)."""
    for name in ("httpx2", "httpx"):
        logger = logging.getLogger(name)
        if _LOG_FILTER not in logger.filters:
            logger.addFilter(_LOG_FILTER)


@dataclass
class Downloader:
    """Fetches generated media with an ``httpx2.Client`` (no API key, redirects followed)."""

    client: Any
    timeout_s: float

    @classmethod
    def create(cls, timeout_s: float) -> Downloader:
        import httpx2

        install_log_filter()
        return cls(
            httpx2.Client(timeout=timeout_s, follow_redirects=True, trust_env=True), timeout_s
        )

    def close(self) -> None:
        self.client.close()

    def fetch(self, url: str, what: str) -> bytes:
        import httpx2

        shown = redact_url(url)
        try:
            response = self.client.get(url)
        except httpx2.TimeoutException as exc:
            raise MediaError(
                f"{what} download from {shown} timed out after {self.timeout_s:g} s "
                f"({type(exc).__name__})",
                "timeout",
            ) from None
        except httpx2.HTTPError as exc:
            raise MediaError(
                f"{what} download from {shown} failed: {type(exc).__name__}: {_short(exc)}"
            ) from None
        if response.status_code >= 400:
            reason = response.reason_phrase or ""
            hint = (
                " (the signed URL expired or is not readable from here)"
                if response.status_code in (401, 403)
                else ""
            )
            raise MediaError(
                f"{what} download from {shown} returned HTTP "
                f"{response.status_code} {reason}".rstrip()
                + hint
            )
        if not response.content:
            raise MediaError(f"{what} download from {shown} was empty", "empty_output")
        return response.content


def _short(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_image(data: bytes) -> Any:
    """The downloaded image: PNG bytes as they are, any other decodable format as a PIL image."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            if img.format == "PNG":
                return bytes(data)
            return img.convert("RGB")
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        head = data[:8]
        raise MediaError(
            f"the downloaded image is not a readable image ({len(data)} bytes, "
            f"starting {head!r}): {_short(exc)}"
        ) from None


def read_audio(data: bytes) -> Audio:
    """The downloaded speech (WAV, or any format libsndfile reads) as mono float32 in [-1, 1]."""
    import numpy as np
    import soundfile as sf

    try:
        samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (RuntimeError, ValueError, TypeError, sf.LibsndfileError) as exc:
        raise MediaError(
            f"the downloaded speech is not a readable WAV ({len(data)} bytes, "
            f"starting {data[:12]!r}): {_short(exc)}"
        ) from None
    mono = samples.mean(axis=1) if samples.shape[1] > 1 else samples[:, 0]
    if mono.size == 0:
        raise MediaError("the downloaded speech has no samples", "empty_output")
    return Audio(samples=np.clip(mono, -1.0, 1.0).astype(np.float32), sample_rate=int(rate))


def env_or(name: str, default: str) -> str:
    value = os.environ.get(name, "").strip()
    return value or default


__all__ = [
    "Downloader",
    "MediaError",
    "env_or",
    "image_url_for",
    "install_log_filter",
    "read_audio",
    "read_image",
]
