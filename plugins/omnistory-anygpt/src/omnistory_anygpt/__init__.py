"""omnistory plugin: AnyGPT-chat as an any-to-any backbone (``backbone=anygpt``)."""

__version__ = "0.1.0"
