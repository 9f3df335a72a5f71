"""Offline image experts: ``copy`` (current page), ``oracle`` (reference page), ``noop``."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from omnistory_core.components import ImageExpert
from omnistory_core.params import Param

DELAY = Param("delay_s", float, 0.0, "simulated model latency in seconds", runtime=True, ge=0)


class CopyImage(ImageExpert):
    """ViStoryBench's copy baseline: the next illustration is the current one.  Ignores the plan, so
    in a sweep it runs once per example whatever the planner."""

    name = "copy"
    version = "1"
    reads = ("current_image",)
    description = "returns the current page illustration (copy baseline)"
    parameters = ()

    def run_one(self, item: dict[str, Any]):
        return item["current_image"].open_image()


class OracleImage(ImageExpert):
    """ORACLE: returns the reference next illustration.  For validating metrics only."""

    name = "oracle"
    version = "1"
    oracle = True
    reads = ("reference_image",)
    description = "ORACLE: the reference illustration (metric validation only)"
    parameters = ()

    def run_one(self, item: dict[str, Any]):
        return item["reference_image"].open_image()


class NoopImage(ImageExpert):
    """A small flat image whose colour depends on the prompt: framework-overhead measurements."""

    name = "noop"
    version = "1"
    reads = ("image_prompt",)
    description = "flat colour from the prompt hash (framework-overhead measurements)"
    parameters = (
        DELAY,
        # added after stores were written: in the cache key only when changed
        Param("size", int, 64, "image side in pixels", ge=1, key_at_default=False),
    )

    def run_one(self, item: dict[str, Any]):
        from PIL import Image

        time.sleep(self.params["delay_s"])
        size = self.params["size"]
        rgb = tuple(hashlib.sha256(item["image_prompt"].encode()).digest()[:3])
        return Image.new("RGB", (size, size), rgb)


IMAGE_EXPERTS = (CopyImage, OracleImage, NoopImage)
