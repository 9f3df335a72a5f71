"""omnistory plugin: UNO image experts ``uno`` and ``uno_refs`` (from a checkout)."""

__version__ = "0.1.0"
