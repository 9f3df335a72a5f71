"""omnistory plugin: the ``voxcpm`` TTS expert (VoxCPM2 voice design)."""

__version__ = "0.1.0"
