"""omnistory plugin: the ``gpt`` planner (OpenAI SDK)."""

__version__ = "0.1.0"
