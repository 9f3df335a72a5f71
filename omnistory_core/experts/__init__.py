"""Helpers shared by expert plugins (no heavy imports at module import)."""
