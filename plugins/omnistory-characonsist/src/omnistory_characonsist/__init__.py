"""omnistory plugin: CharaConsist, ``image=characonsist`` (from a checkout)."""

__version__ = "0.1.0"
