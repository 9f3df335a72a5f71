"""Helpers of the judge tests (a uniquely named module: ``conftest`` names collide across the
suite): the expected prompts typed from the paper, content joining, media files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
from PIL import Image

DATA = Path(__file__).resolve().parents[1] / "data" / "judge_prompts"
MEDIA_KEYS = ("current_image", "reference_image", "candidate_image", "candidate_speech")


def expected_text(name: str) -> str:
    """A prompt typed from the paper (App. E.4), byte for byte."""
    return (DATA / name).read_bytes().decode("utf-8")


def joined(content, media_names: dict[str, str]) -> str:
    """Message content as one string, attachments as ``[[kind:file name]]`` (test data layout)."""
    if isinstance(content, str):
        return content
    out = []
    for part in content:
        if part["type"] == "text":
            out.append(part["text"])
        else:
            out.append(f"[[{part['type']}:{media_names[part[part['type']]]}]]")
    return "".join(out)


def make_media(directory: Path) -> dict[str, str]:
    """Three small PNGs and a short 16 kHz WAV; returns input name -> path."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for n, key in enumerate(MEDIA_KEYS[:3]):
        path = directory / f"{key.split('_')[0]}.png"
        Image.new("RGB", (8, 8), (40 * n, 80, 120)).save(path)
        paths[key] = str(path)
    wav = directory / "candidate.wav"
    t = np.arange(8000, dtype=np.float32) / 16000
    sf.write(wav, (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 16000)
    paths["candidate_speech"] = str(wav)
    return paths
