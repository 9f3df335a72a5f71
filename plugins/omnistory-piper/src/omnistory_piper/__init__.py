"""omnistory plugin: the ``piper`` TTS expert (Piper VITS voices through piper-tts, CPU)."""

__version__ = "0.1.0"
