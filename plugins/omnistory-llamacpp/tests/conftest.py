"""The tests' fixtures; the tiny GGUF writer is in llamacpp_test_gguf (a uniquely named module, so
that test modules import it without clashing with other plugins' conftest modules)."""

from llamacpp_test_gguf import tiny_gguf

__all__ = ["tiny_gguf"]
