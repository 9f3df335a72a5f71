"""omnistory-dynin: Dynin-Omni as an any-to-any backbone (``backbone=dynin``)."""

__version__ = "0.1.0"
