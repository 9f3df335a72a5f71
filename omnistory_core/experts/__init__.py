"""Helpers shared by image and TTS expert plugins (no heavy imports at module import).

* :mod:`~omnistory_core.experts.diffusion`: what the diffusers image experts share (settings,
  per-item seeds, devices, batched calls with fallback);
* :mod:`~omnistory_core.experts.voices`: the deterministic voice choice of the TTS experts.

Planner helpers are :mod:`omnistory_core.planning`; plugins import both through
:mod:`omnistory_core.api`.
"""
