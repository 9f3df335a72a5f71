"""omnistory plugin: BAAI Emu3 as the semi-orchestration text+image backbone ``emu3``."""

__version__ = "0.1.0"
