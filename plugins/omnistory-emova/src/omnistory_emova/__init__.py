"""omnistory plugin: EMOVA-7B as the semi-orchestration (text + speech) backbone ``emova``."""

__version__ = "0.1.0"
