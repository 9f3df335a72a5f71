"""Media conversions shared by the backends (numpy, soundfile and PIL only; no torch).

* Qwen2.5-Omni speaks at 24 kHz; its audio encoder listens at 16 kHz.  The official runner writes
  the pass-1 speech to a 16-bit WAV file and pass 2 reads it back resampled to 16 kHz
  (``qwen_omni_utils`` loads audio with librosa); :func:`listening_copy` does the same in memory.
* ``qwen_omni_utils`` resizes an image to multiples of 28 px within [4, 16384] x 28 x 28 pixels
  (bicubic) before the processor sees it; :func:`omni_utils_resize` applies that rule.
"""

from __future__ import annotations

import base64
import io
import math
from typing import Any

import numpy as np

#: the rate of Qwen2.5-Omni's speech output
OUTPUT_SAMPLE_RATE = 24_000
#: the rate its audio encoder's feature extractor expects
INPUT_SAMPLE_RATE = 16_000

#: qwen_omni_utils' image rule: sides in multiples of 28 px, area within these bounds
IMAGE_FACTOR = 28
IMAGE_MIN_PIXELS = 4 * 28 * 28
IMAGE_MAX_PIXELS = 16384 * 28 * 28


def wav_bytes(samples: Any, sample_rate: int) -> bytes:
    """Mono float samples -> a 16-bit PCM WAV file (what ``soundfile.write`` makes of a .wav)."""
    import soundfile as sf

    data = np.clip(np.asarray(samples, dtype=np.float32).reshape(-1), -1.0, 1.0)
    buf = io.BytesIO()
    sf.write(buf, data, int(sample_rate), format="WAV", subtype="PCM_16")
    return buf.getvalue()


def read_wav(data: bytes) -> tuple[np.ndarray, int]:
    """WAV (or any soundfile format) bytes -> mono float32 samples and their rate."""
    import soundfile as sf

    samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return samples.mean(axis=1).astype(np.float32), int(rate)


def resample(samples: np.ndarray, orig_sr: int, target_sr: int) -> np.ndarray:
    """Resample with librosa (its default, as ``librosa.load`` does), else a polyphase filter."""
    if orig_sr == target_sr:
        return np.asarray(samples, dtype=np.float32)
    try:
        import librosa
    except ImportError:  # pragma: no cover - librosa is a dependency; scipy comes with it
        from scipy.signal import resample_poly

        g = math.gcd(int(orig_sr), int(target_sr))
        out = resample_poly(samples, int(target_sr) // g, int(orig_sr) // g)
        return np.asarray(out, dtype=np.float32)
    return np.asarray(
        librosa.resample(
            np.asarray(samples, dtype=np.float32), orig_sr=orig_sr, target_sr=target_sr
        ),
        dtype=np.float32,
    )


def listening_copy(samples: Any, sample_rate: int) -> np.ndarray:
    """The pass-1 speech as pass 2 hears it: 16-bit WAV round trip, then 16 kHz."""
    pcm, rate = read_wav(wav_bytes(samples, sample_rate))
    return resample(pcm, rate, INPUT_SAMPLE_RATE)


def smart_size(
    height: int,
    width: int,
    factor: int = IMAGE_FACTOR,
    min_pixels: int = IMAGE_MIN_PIXELS,
    max_pixels: int = IMAGE_MAX_PIXELS,
) -> tuple[int, int]:
    """Height and width rounded to multiples of ``factor`` with the area kept within bounds."""
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def omni_utils_resize(image: Any) -> Any:
    """An RGB PIL image resized by the ``qwen_omni_utils`` rule (unchanged when already fitting)."""
    from PIL import Image

    image = image.convert("RGB")
    h, w = smart_size(image.height, image.width)
    if (h, w) == (image.height, image.width):
        return image
    return image.resize((w, h), resample=Image.Resampling.BICUBIC)


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def image_mime(path: str, data: bytes) -> str:
    """The MIME type of an image file, from its leading bytes (falling back to the extension)."""
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    lowered = path.lower()
    if lowered.endswith((".jpg", ".jpeg")):
        return "image/jpeg"
    return "image/png"
