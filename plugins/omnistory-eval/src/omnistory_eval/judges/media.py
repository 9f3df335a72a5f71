"""Reading judge media: data URLs for chat APIs, decoded arrays for offline backends."""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Any

_AUDIO_FORMATS = {".wav": "wav", ".mp3": "mp3", ".flac": "flac", ".ogg": "ogg"}


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise FileNotFoundError(f"cannot read the {what} file {path}: {exc.strerror}") from exc


def image_data_url(path: str) -> str:
    """``data:<mime>;base64,...`` for an image file (the mime type from its suffix, else PNG)."""
    mime = mimetypes.guess_type(path)[0] or "image/png"
    return f"data:{mime};base64," + base64.b64encode(_read(path, "image")).decode("ascii")


def audio_base64(path: str) -> tuple[str, str]:
    """(base64 data, format) of an audio file, for ``input_audio`` content parts."""
    fmt = _AUDIO_FORMATS.get(Path(path).suffix.lower(), "wav")
    return base64.b64encode(_read(path, "audio")).decode("ascii"), fmt


def load_rgb_image(path: str) -> Any:
    """A PIL RGB image (the file is closed before returning)."""
    from PIL import Image

    with Image.open(path) as img:
        return img.convert("RGB")


def load_audio(path: str) -> tuple[Any, int]:
    """(mono float32 samples, sample rate) at the file's own rate; channels are averaged."""
    import numpy as np
    import soundfile as sf

    try:
        samples, rate = sf.read(path, dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as exc:
        raise FileNotFoundError(f"cannot read the audio file {path}: {exc}") from exc
    return np.ascontiguousarray(samples.mean(axis=1), dtype=np.float32), int(rate)
