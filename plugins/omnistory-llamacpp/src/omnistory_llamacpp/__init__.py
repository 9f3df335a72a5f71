"""omnistory plugin: the ``llamacpp`` planner (a local GGUF model, text only)."""

__version__ = "0.1.0"
