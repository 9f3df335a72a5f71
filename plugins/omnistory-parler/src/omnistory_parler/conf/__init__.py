"""Hydra configs shipped by omnistory-parler (``tts/parler.yaml``)."""
