"""omnistory plugin: Qwen2.5-Omni-7B, a semi-orchestration T+S backbone (backbone=qwen25omni)."""

__version__ = "0.1.0"
