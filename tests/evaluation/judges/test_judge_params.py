"""Judge parameters: the result cache keys of the judges, pinned.

The keys below were computed before the judges declared their parameters, through the path
``evaluate`` takes (the judge's config plus ``--set`` overrides, built by ``build_evaluators``):
runtime settings (backend, endpoint, concurrency, timeouts, retries, engine memory, swap space)
stay out of the key, output-changing ones (seed, max_new_tokens, checkpoint, temperature,
max_model_len) go in, and stores written before keep their results."""

from __future__ import annotations

import pytest

from omnistory_core.engine.stage import item_key
from omnistory_core.evaluation.evaluators import build_evaluators

INPUTS = {"candidate_text": "The fox ran home.", "reference_text": "The fox went home."}
Q = "judge.text-qwen3-30b-a3b."
RUNTIME = [
    f"{Q}backend=openai",
    f"{Q}base_url=http://h:1/v1",
    f"{Q}concurrency=3",
    f"{Q}timeout=30",
    f"{Q}max_retries=1",
    f"{Q}model=served",
    f"{Q}repair=false",
    f"{Q}swap_space=4",
    f"{Q}gpu_memory_utilization=0.8",
    f"{Q}tensor_parallel_size=2",
    f"{Q}batch_size=2",
]
PINNED = [
    ("text-qwen3-30b-a3b", [], "c84e53a1cdfd971e0202bf39c220f5fd46814625db330dd5b1a66684c07dce40"),
    ("omni-gemma4-12b", [], "9267699ac26be12ac8bd79436521270b6055720b618fe2466e01b656ba9bac1a"),
    (
        "speech-audio-flamingo-next",
        [],
        "c121886d7f6ab93bdd0e5fd053e54039bba81c2115bf7fd4e487194d5f2c8f77",
    ),
    ("text-hosted", [], "4c13e5825d5ad27553365c765d937daaca11375796c68cbe365fae7330d34057"),
    (
        "text-qwen3-30b-a3b",
        [f"{Q}temperature=0.5"],
        "5ac8b9d6207e2820b01e77c48a08b0daa765be336ba1af15dde4693e222e7571",
    ),
    (
        "text-qwen3-30b-a3b",
        [f"{Q}max_new_tokens=512"],
        "332875587cf0f2d8e28522c97bada2480cc0c83138935e60130cf5e318779fdf",
    ),
    (
        "text-qwen3-30b-a3b",
        [f"{Q}checkpoint=/models/qwen3-ft"],
        "195ceeafa0827ddae888358c34a30a3b47712cc72e8fd857c2476c739e367e67",
    ),
    (
        "omni-gemma4-12b",
        ["judge.omni-gemma4-12b.seed=7", "judge.omni-gemma4-12b.max_model_len=16384"],
        "59060a800abd3fb4c31067cf9ef01957f8a111d69a13867fac1c02787ada7dbc",
    ),
    # every runtime setting changed at once: the default key
    (
        "text-qwen3-30b-a3b",
        RUNTIME,
        "c84e53a1cdfd971e0202bf39c220f5fd46814625db330dd5b1a66684c07dce40",
    ),
]


@pytest.mark.parametrize(("judge", "overrides", "expected"), PINNED)
def test_judge_result_keys_are_pinned(judge, overrides, expected):
    [component] = build_evaluators([], [judge], overrides)
    assert item_key(component, INPUTS) == expected
