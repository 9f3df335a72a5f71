"""planner=llamacpp through its own load() on the tiny random GGUF the tests write, with each
backend: transformers (needs transformers, torch and gguf) and llama_cpp (needs llama-cpp-python,
which has no binary wheel: skipped where it was not built)."""

from __future__ import annotations

import pytest
from llamacpp_test_gguf import need
from omnistory_llamacpp.planner import LlamaCppPlanner
from omnistory_testkit import demo_planner_items

from omnistory_core.api import PlannerResponse

BACKENDS = {
    "transformers": ("transformers", "torch", "gguf"),
    "llama_cpp": ("llama_cpp",),
}
WHY = {
    "transformers": "pip install './plugins/omnistory-llamacpp[transformers]'",
    "llama_cpp": "llama-cpp-python has no binary wheel; build it (README: 'CI') and install it",
}


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def planner(request, tiny_gguf):
    need(*BACKENDS[request.param], why=WHY[request.param])
    component = LlamaCppPlanner(model=str(tiny_gguf), backend=request.param, max_tokens=12)
    component.load()
    yield component
    component.unload()


@pytest.fixture(scope="module")
def items():
    return demo_planner_items()


def test_loads_its_gguf_and_answers(planner, items):
    reply = planner.run_one(items[0])
    assert isinstance(reply, PlannerResponse) and isinstance(reply.text, str) and reply.text
    usage = reply.usage
    assert usage["input_tokens"] > 500  # the whole project prompt went through the chat template
    # llama-cpp-python counts the token that hit the limit as well: 13 for max_tokens=12
    assert 0 < usage["output_tokens"] <= 13 and usage["truncated_calls"] in (0, 1)
    assert usage["grammar_calls"] == 1  # both backends: the Plan schema holds the answer


def test_the_grammar_forces_the_plan_object(planner, items):
    text = planner.run_one(items[0]).text
    # random weights, yet the grammar makes the answer start as a plan
    assert text.replace(" ", "").startswith('{"narration":"'), text


def test_without_the_grammar_the_transformers_backend_writes_freely(items, tiny_gguf):
    need("transformers", "torch", "gguf", why=WHY["transformers"])
    free = LlamaCppPlanner(
        model=str(tiny_gguf), backend="transformers", grammar=False, max_tokens=12
    )
    try:
        reply = free.run_one(items[0])
    finally:
        free.unload()
    assert reply.usage["grammar_calls"] == 0
    assert not reply.text.replace(" ", "").startswith('{"narration":"'), reply.text


def test_same_prompt_same_answer_in_any_order(planner, items, tiny_gguf):
    first = planner.run_one(items[0]).text
    assert planner.run_one(items[1]).text != first  # the prompt reaches the model
    assert planner.run_one(items[0]).text == first  # no state carried over from items[1]
    fresh = LlamaCppPlanner(model=str(tiny_gguf), backend=planner.backend_name(), max_tokens=12)
    try:
        assert fresh.run_one(items[0]).text == first  # loads lazily on its first call
    finally:
        fresh.unload()


def test_sampling_follows_the_seed(planner, items):
    def sample(seed: int) -> str:
        planner.params.update(temperature=1.5, seed=seed)
        try:
            return planner.run_one(items[0]).text
        finally:
            planner.params.update(temperature=0.0, seed=0)

    assert sample(1) == sample(1)
    assert len({sample(1), sample(2), sample(3)}) > 1


def test_the_transformers_backend_reads_its_gguf_once(items, tiny_gguf, monkeypatch):
    """transformers reads a GGUF three times per load (tokenizer, config, weights); within
    ``one_gguf_reader`` one reader serves the three, and the model answers as with three."""
    need("transformers", "torch", "gguf", why=WHY["transformers"])
    import contextlib

    import gguf
    from omnistory_llamacpp import backends

    opened: list[str] = []
    original = gguf.GGUFReader

    class Counting(original):  # type: ignore[misc, valid-type]
        def __init__(self, path, mode="r"):
            opened.append(str(path))
            super().__init__(path, mode)

    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    once = LlamaCppPlanner(model=str(tiny_gguf), backend="transformers", max_tokens=12)
    text = once.run_one(items[0]).text
    once.unload()
    assert opened == [str(tiny_gguf)]
    assert gguf.GGUFReader is Counting  # restored after the load
    # without it, three reads and the same answer
    opened.clear()
    monkeypatch.setattr(backends, "one_gguf_reader", lambda: contextlib.nullcontext({}))
    plain = LlamaCppPlanner(model=str(tiny_gguf), backend="transformers", max_tokens=12)
    assert plain.run_one(items[0]).text == text
    plain.unload()
    assert len(opened) == 3, opened
