"""The API planners' cache keys did not change when their parameters became declared.

The digests below were computed with the planners as they were before (``param_defaults`` and a
hand-written check), for the first demo example: same key, same stored plans."""

from __future__ import annotations

import pytest
from omnistory_testkit import demo_planner_items

from omnistory_core.engine.stage import item_key

CUSTOM = {"seed": 3, "temperature": 0.5, "max_tokens": 100, "batch_size": 8, "max_concurrency": 2}
KEYS = {
    ("omnistory_openai.planner", "GPTPlanner"): (
        "ddad6c110d655cc84bde31d43b7d11a77db7d5db6c9faa41f1099cc6690098ac",
        "442da9826f42f369eebf34708ff011c7e21c9559a8ce61a9864279159706865f",
    ),
    ("omnistory_anthropic.planner", "ClaudePlanner"): (
        "446e742f871514d6be2c2c65a01e03201cb204c247b6cbab7c05ad5d78e7a599",
        "116514f053ea87d0ad7bf84c0aafe0075a3ae930cb0608ac973ddf9b969995da",
    ),
    ("omnistory_vllm.planner", "GLMPlanner"): (
        "c1aa448c25e930ba6160526e8163f70ccc03a404671e9cb21f08d4b209f73ff2",
        "0536d0c867e3580209768913050a7b256e09e3dba529b4c0bf862ae8526f971f",
    ),
    ("omnistory_vllm.planner", "InternVLPlanner"): (
        "fc811ca4b79e8af318c8800cd7160c05f718eed0e7b729b4047bb89b98d9c28c",
        "df221345a5983b3cce821713ff5ab34309e7dbbd5a3f6e02d89be4570c76b28d",
    ),
    ("omnistory_vllm.planner", "Qwen35Planner"): (
        "793f2de7d71d3707b659cdc54205115c1702b9b0ff07a6c09761d70d88b4b2b6",
        "5830fc0594549ee6122cc12ed40fab56c079abfcd3fa0221649081134009c35b",
    ),
}


@pytest.mark.parametrize(("where", "keys"), list(KEYS.items()), ids=lambda v: str(v))
def test_declared_planner_keeps_its_cache_key(where, keys):
    module_name, class_name = where
    cls = getattr(pytest.importorskip(module_name), class_name)
    assert cls.parameters is not None, f"{class_name} declares its parameters"
    item = demo_planner_items(limit=1)[0]
    assert item_key(cls(seed=0), item) == keys[0]
    assert item_key(cls(**CUSTOM), item) == keys[1]
    # runtime parameters stay out of the key
    runtime = cls(seed=0, base_url="http://elsewhere/v1", timeout_s=5, max_retries=0)
    assert item_key(runtime, item) == keys[0]


def test_declared_planner_refuses_a_bad_value_naming_the_key():
    module = pytest.importorskip("omnistory_openai.planner")
    from omnistory_core.api import ConfigError, PlannerConfigError

    with pytest.raises(PlannerConfigError, match=r"planner=gpt: planner\.max_tokens must be >= 1"):
        module.GPTPlanner(max_tokens=0)
    with pytest.raises(ConfigError, match="did you mean reasoning_efort -> reasoning_effort"):
        module.GPTPlanner(reasoning_efort="low")
    from omnistory_core.kit.planning.base import VLMPlanner

    assert VLMPlanner.parameters is None  # subclasses with param_defaults only keep working
