"""planner=llamacpp with a real GGUF (e.g. Qwen2.5-Coder-0.5B-Instruct, reassembled with
``python -m omnistory_llamacpp assemble``), named by OMNISTORY_MODEL_PLANNER_LLAMACPP.

The loading path is the tiny-GGUF tests' (those always run); this one checks what only a real
model can show: with the grammar, its answers are schema-valid plans."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from llamacpp_test_gguf import need
from omnistory_llamacpp.planner import LlamaCppPlanner
from omnistory_testkit import demo_planner_items

from omnistory_core.api import parse_plan

pytestmark = pytest.mark.weights

MODEL = os.environ.get("OMNISTORY_MODEL_PLANNER_LLAMACPP", "")


@pytest.mark.skipif(
    not MODEL or not Path(MODEL).is_file(),
    reason="no real GGUF: set OMNISTORY_MODEL_PLANNER_LLAMACPP (README: the Qwen GGUFs)",
)
@pytest.mark.parametrize("backend", ["llama_cpp", "transformers"])
def test_a_real_model_writes_schema_valid_plans_with_the_grammar(backend: str) -> None:
    if backend == "llama_cpp":
        need("llama_cpp", why="llama-cpp-python is not installed (README: 'CI')")
    else:
        need("transformers", "torch", "gguf", "llguidance", why="the transformers extra")
    planner = LlamaCppPlanner(model=MODEL, backend=backend, max_tokens=384)
    try:
        for item in demo_planner_items():
            reply = planner.run_one(item)
            result = parse_plan(reply.text)
            assert result.ok, (reply.text, result.failure)
            assert reply.usage["grammar_calls"] == 1 and reply.usage["truncated_calls"] == 0
    finally:
        planner.unload()
