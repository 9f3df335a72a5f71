"""omnistory plugin: OmniGen2 image experts ``omnigen2`` and ``omnigen2_refs`` (from a checkout)."""

__version__ = "0.1.0"
