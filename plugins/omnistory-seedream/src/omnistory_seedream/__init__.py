"""omnistory plugin: the ``seedream`` image expert (Seedream 4, OpenAI-style images endpoint)."""

__version__ = "0.1.0"
