"""What one model call returns, whatever the backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # plugin registration imports this module: numpy costs every CLI start
    import numpy as np


@dataclass
class Speech:
    """A waveform the model spoke: float32 mono samples, their rate, and the WAV file they came in
    (a server's own bytes) when there was one."""

    samples: np.ndarray
    sample_rate: int
    wav: bytes | None = None

    @property
    def seconds(self) -> float:
        return float(len(self.samples)) / float(self.sample_rate or 1)


@dataclass
class Reply:
    """One call: the assistant text, the speech if any, and token counts (``None`` if unknown)."""

    text: str
    speech: Speech | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    generated_ids: list[int] | None = None

    def tokens(self) -> dict[str, Any]:
        return {"prompt": self.prompt_tokens, "completion": self.completion_tokens}
