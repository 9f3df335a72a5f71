"""Helpers for testing and measuring omnistory systems without model weights.

``omnistory_core.testing.standins``: stand-in components that take the place of installed model
plugins under the same names, so a real sweep (presets, suites, the store, the report) runs offline.
"""
