"""omnistory plugin: the ``claude`` planner (Anthropic SDK)."""

__version__ = "0.1.0"
