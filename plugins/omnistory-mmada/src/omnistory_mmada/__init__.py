"""omnistory plugin: the MMaDA semi-orchestration (T+I) backbone ``mmada``."""

__version__ = "0.1.0"
