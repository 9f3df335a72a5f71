"""omnistory plugin: the ``glm``, ``internvl`` and ``qwen35`` planners (vLLM server)."""

__version__ = "0.1.0"
