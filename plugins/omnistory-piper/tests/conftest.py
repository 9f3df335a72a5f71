"""The tests' fixtures; the tiny voice builder is in piper_test_voice (a uniquely named module, so
that test modules import it without clashing with other plugins' conftest modules)."""

from piper_test_voice import tiny_voice

__all__ = ["tiny_voice"]
