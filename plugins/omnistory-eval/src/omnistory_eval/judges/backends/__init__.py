"""Judge inference backends: vLLM offline, OpenAI-compatible servers, Transformers."""

from omnistory_eval.judges.backends.base import Backend, Decoding, Generation
from omnistory_eval.judges.backends.registry import BACKENDS, create_backend

__all__ = ["BACKENDS", "Backend", "Decoding", "Generation", "create_backend"]
