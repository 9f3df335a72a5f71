"""Versioned JSON Schema files shipped as package data (read with `importlib.resources`)."""
