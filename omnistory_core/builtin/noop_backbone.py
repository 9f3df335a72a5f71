"""``backbone=noop``: constant outputs in one call, for framework-overhead measurements.

Any-to-any (text, image and speech from one call), so ``backbone=noop`` runs a complete system
with no expert; ``delay_s`` (runtime only) simulates model latency.
"""

from __future__ import annotations

import time
from typing import Any

from omnistory_core.components import Audio, Backbone, BackboneOutput
from omnistory_core.params import Param


class NoopBackbone(Backbone):
    name = "noop"
    version = "1"
    baseline = True
    produces = frozenset({"text", "image", "speech"})
    reads = ("current_text",)
    description = "constant narration, flat image and tone from one call (framework overhead)"
    parameters = (
        Param("delay_s", float, 0.0, "simulated model latency in seconds", runtime=True, ge=0),
    )

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        import numpy as np
        from PIL import Image

        time.sleep(self.params["delay_s"])
        sr = 16000
        t = np.arange(int(0.25 * sr), dtype=np.float32) / sr
        return BackboneOutput(
            text='Nothing happens. "Hello," said the narrator.',
            image=Image.new("RGB", (64, 64), (128, 128, 128)),
            speech=Audio((0.1 * np.sin(2 * np.pi * 200.0 * t)).astype(np.float32), sr),
        )
