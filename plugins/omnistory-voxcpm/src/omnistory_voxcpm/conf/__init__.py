"""Hydra configs shipped by omnistory-voxcpm (``tts/voxcpm.yaml``)."""
