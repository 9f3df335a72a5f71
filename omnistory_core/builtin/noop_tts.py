"""``tts=noop``: a short quiet tone per utterance, for framework-overhead measurements."""

from __future__ import annotations

import time
from typing import Any

from omnistory_core.components import Audio, TTSExpert
from omnistory_core.params import Param


class NoopTTS(TTSExpert):
    name = "noop"
    version = "1"
    description = "0.25 s tone (framework-overhead measurements)"
    parameters = (
        Param("delay_s", float, 0.0, "simulated model latency in seconds", runtime=True, ge=0),
    )

    def run_one(self, item: dict[str, Any]) -> Audio:
        import numpy as np

        time.sleep(self.params["delay_s"])
        sr = 16000
        t = np.arange(int(0.25 * sr), dtype=np.float32) / sr
        hz = 200.0 if item["gender"] == "female" else 120.0
        return Audio((0.1 * np.sin(2 * np.pi * hz * t)).astype(np.float32), sr)
