"""omnistory plugin: StoryDiffusion's original mode, ``image=storydiffusion``."""

__version__ = "0.1.0"
