"""omnistory plugin: the ``parler`` TTS expert (Parler-TTS Large v1)."""

__version__ = "0.1.0"
