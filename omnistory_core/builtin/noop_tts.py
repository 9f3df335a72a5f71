"""``tts=noop``: a short quiet tone per utterance, for framework-overhead measurements."""

from __future__ import annotations

import time
from typing import Any

from omnistory_core.components import Audio, TTSExpert


class NoopTTS(TTSExpert):
    name = "noop"
    version = "1"
    runtime_params = ("delay_s",)
    description = "0.25 s tone (framework-overhead measurements)"

    def run_one(self, item: dict[str, Any]) -> Audio:
        import numpy as np

        time.sleep(float(self.params.get("delay_s") or 0.0))
        sr = 16000
        t = np.arange(int(0.25 * sr), dtype=np.float32) / sr
        hz = 200.0 if item["gender"] == "female" else 120.0
        return Audio((0.1 * np.sin(2 * np.pi * hz * t)).astype(np.float32), sr)
