"""Offline image experts: ``copy`` (current page), ``oracle`` (reference page), ``noop``."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from omnistory_core.components import ImageExpert


class CopyImage(ImageExpert):
    """ViStoryBench's copy baseline: the next illustration is the current one.  Ignores the plan, so
    in a sweep it runs once per example whatever the planner."""

    name = "copy"
    version = "1"
    reads = ("current_image",)
    description = "returns the current page illustration (copy baseline)"

    def run_one(self, item: dict[str, Any]):
        return item["current_image"].open_image()


class OracleImage(ImageExpert):
    """ORACLE: returns the reference next illustration.  For validating metrics only."""

    name = "oracle"
    version = "1"
    oracle = True
    reads = ("reference_image",)
    description = "ORACLE: the reference illustration (metric validation only)"

    def run_one(self, item: dict[str, Any]):
        return item["reference_image"].open_image()


class NoopImage(ImageExpert):
    """A small flat image whose colour depends on the prompt: framework-overhead measurements."""

    name = "noop"
    version = "1"
    reads = ("image_prompt",)
    runtime_params = ("delay_s",)
    description = "flat colour from the prompt hash (framework-overhead measurements)"

    def run_one(self, item: dict[str, Any]):
        from PIL import Image

        time.sleep(float(self.params.get("delay_s") or 0.0))
        size = int(self.params.get("size") or 64)
        rgb = tuple(hashlib.sha256(item["image_prompt"].encode()).digest()[:3])
        return Image.new("RGB", (size, size), rgb)


IMAGE_EXPERTS = (CopyImage, OracleImage, NoopImage)
