"""Tiny random FLUX.1 checkpoints, built offline for the tests.

Every part of a real FLUX.1 pipeline is there at toy size (``omnistory_flux.random_pipeline``):
a FluxTransformer2DModel with guidance embedding, an AutoencoderKL with four blocks (the usual 8x
VAE factor and 16-pixel grid), CLIP and T5 text encoders, and tokenizers made locally.
``save_pretrained`` writes the directory layout of the hub checkpoints, which the experts then load
through their own ``load()``.
"""

from __future__ import annotations

from pathlib import Path

#: small generation settings the tests share (64x64 pixels = 4x4 latent tokens, 2 steps)
TINY = {"height": 64, "width": 64, "steps": 2, "max_sequence_length": 32}


def build_tiny_flux(path: Path, kind: str = "dev", seed: int = 0) -> Path:
    """Save a random FLUX.1 pipeline (``kind`` dev or kontext) into ``path``."""
    from omnistory_flux.random_pipeline import random_flux_pipeline

    # sharpened attention keeps Kontext's dependence on the page measurable at 64x64, 2 steps
    random_flux_pipeline(kind, "tiny", seed=seed, sharpen=True).save_pretrained(path)
    return path
