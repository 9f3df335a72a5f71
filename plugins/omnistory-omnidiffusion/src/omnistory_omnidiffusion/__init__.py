"""omnistory plugin: Omni-Diffusion (VITA-MLLM) as an any-to-any backbone
(``backbone=omnidiffusion``)."""

__version__ = "0.1.0"
