"""Judge backends: base.py defines the protocol and imports no concrete backend; the registry
names them and imports the chosen one only when it is created."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from omnistory_eval.judges.backends import base, registry
from omnistory_eval.judges.specs import JUDGE_SPECS

CONCRETE = ("openai_compat", "vllm_offline", "transformers_backend")


def test_base_imports_no_concrete_backend_and_the_registry_none_at_import():
    for module in (base, registry):
        tree = ast.parse(Path(str(module.__file__)).read_text())
        imported = {
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        } | {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
        assert not [m for m in imported if m.rsplit(".", 1)[-1] in CONCRETE], module.__name__
    code = (
        "import sys, omnistory_eval.judges.backends as b\n"
        "b.create_backend  # the package's names\n"
        f"print([m for m in {CONCRETE!r} if 'omnistory_eval.judges.backends.' + m"
        " in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_create_backend_by_name_from_the_registry_only():
    from omnistory_eval.judges.backends import BACKENDS, create_backend

    assert create_backend is registry.create_backend and BACKENDS == registry.BACKENDS
    # the old home forwards nothing: base.py and the registry would import each other
    assert not hasattr(base, "create_backend") and not hasattr(base, "BACKENDS")
    spec = JUDGE_SPECS["text-qwen3-30b-a3b"]
    backend = create_backend("openai", spec, {"base_url": "http://127.0.0.1:9/v1"})
    assert type(backend).__name__ == "OpenAICompatibleBackend"
    with pytest.raises(ValueError, match="unknown backend 'nope'; expected one of"):
        create_backend("nope", spec, {})
