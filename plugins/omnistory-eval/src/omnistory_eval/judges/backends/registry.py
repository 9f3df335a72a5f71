"""The judge backends by name, imported only when one is created.

:mod:`~omnistory_eval.judges.backends.base` defines what a backend is and imports none
of them; this module is the one place that knows the concrete classes, and it imports a backend's
module (and so its inference stack) only in :func:`create_backend`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # base.py forwards create_backend here: no import back at run time
    from omnistory_eval.judges.backends.base import Backend
    from omnistory_eval.judges.specs import JudgeSpec

#: backend name -> "module:class" (imported lazily)
BACKEND_CLASSES: dict[str, str] = {
    "vllm": "omnistory_eval.judges.backends.vllm_offline:VLLMOfflineBackend",
    "openai": "omnistory_eval.judges.backends.openai_compat:OpenAICompatibleBackend",
    "transformers": ("omnistory_eval.judges.backends.transformers_backend:TransformersBackend"),
}
BACKENDS: tuple[str, ...] = tuple(BACKEND_CLASSES)


def create_backend(name: str, spec: JudgeSpec, params: dict[str, Any]) -> Backend:
    """Instantiate backend ``name`` for ``spec`` (heavy imports happen in its ``load``)."""
    target = BACKEND_CLASSES.get(name)
    if target is None:
        raise ValueError(f"judge {spec.id}: unknown backend {name!r}; expected one of {BACKENDS}")
    module_name, class_name = target.split(":")
    backend_class = getattr(importlib.import_module(module_name), class_name)
    backend: Backend = backend_class(spec, params)
    return backend


__all__ = ["BACKENDS", "BACKEND_CLASSES", "create_backend"]
