"""Hydra configs shipped with omnistory-qwen25omni (backbone/qwen25omni.yaml)."""
