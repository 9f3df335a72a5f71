"""omnistory plugin: the FLUX.1 image experts ``dev`` (FLUX.1-dev) and ``kontext``
(FLUX.1-Kontext-dev, conditioned on the current page)."""

__version__ = "0.1.0"
