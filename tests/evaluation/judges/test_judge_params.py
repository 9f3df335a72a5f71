"""Judge parameters: the result cache keys of the judges, pinned.

The keys below were computed before the judges declared their parameters, through the path
``evaluate`` takes (the judge's config plus ``--set`` overrides, built by ``build_evaluators``):
runtime settings (backend, endpoint, concurrency, timeouts, retries, engine memory, swap space)
stay out of the key, output-changing ones (seed, max_new_tokens, checkpoint, temperature,
max_model_len) go in, and stores written before keep their results.

The judges declare their parameters: a mistyped key, a wrong type or a refused value given to
``evaluate --set judge.<id>.<key>=...`` stops the command in one line before anything is scored."""

from __future__ import annotations

import json

import pytest
from omnistory_eval.evaluators import build_evaluators
from omnistory_eval.judges import HOSTED_JUDGES, PAPER_JUDGES
from omnistory_testkit import run_cli

from omnistory_core.engine.stage import item_key
from omnistory_core.params import ParamError

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


def test_every_judge_declares_its_parameters_and_keys_only_output_settings():
    for cls in (*PAPER_JUDGES, *HOSTED_JUDGES):
        assert cls.parameters is not None
        runtime = set(cls.runtime_params)
        assert {"backend", "base_url", "concurrency", "timeout", "max_retries"} <= runtime
        assert {"swap_space", "gpu_memory_utilization", "device", "repair"} <= runtime
        assert not {"seed", "max_new_tokens", "checkpoint", "temperature"} & runtime
        assert cls().params["swap_space"] == 8.0  # App. E.3.1, kept as the declared default


def test_a_hosted_judges_model_keys_its_results_once_set():
    """Which hosted model answers changes the scores; unset, the key is the pinned one."""
    [default] = build_evaluators([], ["text-hosted"], [])
    [gpt] = build_evaluators([], ["text-hosted"], ["judge.text-hosted.model=gpt-5.4"])
    [other] = build_evaluators([], ["text-hosted"], ["judge.text-hosted.model=other"])
    assert gpt.output_params() == {"max_new_tokens": 1024, "model": "gpt-5.4", "seed": 0}
    assert len({item_key(j, INPUTS) for j in (default, gpt, other)}) == 3
    # a paper judge's `model` is the name its checkpoint is served under: not in the key
    [served] = build_evaluators([], ["text-qwen3-30b-a3b"], [f"{Q}model=served"])
    assert item_key(served, INPUTS) == PINNED[0][2]


def test_repair_options_are_checked_too():
    with pytest.raises(ParamError, match="judge=text-qwen3-30b-a3b: unknown repair parameter"):
        PAPER_JUDGES[0](repair={"backend": "openai", "base_ur": "http://h/v1"})
    assert PAPER_JUDGES[0](repair=True).params["repair"]["backend"] == "vllm"
    assert PAPER_JUDGES[0](repair=False).params["repair"] is False


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("judge-params")
    proc = run_cli(
        "planner=copy", "image=copy", "dataset.limit=2", "output_root=out", cwd=work, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    [run_dir] = (work / "out" / "runs" / "demo").iterdir()
    return run_dir


@pytest.mark.parametrize(
    ("judge", "setting", "message"),
    [
        (
            "text-qwen3-30b-a3b",
            "tmperature=0",
            "judge=text-qwen3-30b-a3b: unknown parameter(s) tmperature; known: api_key_env,",
        ),
        ("omni-gemma4-12b", "max_new_tokens=many", "max_new_tokens must be an integer, got 'many'"),
        ("image-qwen3-vl-32b", "backend=ollama", "backend must be one of ['vllm', 'openai',"),
        ("text-hosted", "top_p=2", "judge=text-hosted: top_p must be <= 1, got 2"),
        ("speech-kimi-audio-7b", "repair.modle=x", "unknown repair parameter(s) modle"),
    ],
)
def test_evaluate_refuses_a_bad_judge_setting_in_one_line(tiny_run, judge, setting, message):
    proc = run_cli(
        "evaluate",
        str(tiny_run),
        "--metrics",
        "",
        "--judges",
        judge,
        "--no-progress",
        "--set",
        f"judge.{judge}.{setting}",
        cwd=tiny_run,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    if setting.startswith("tmperature"):
        assert "(did you mean tmperature -> temperature?)" in lines[0]
    assert not (tiny_run / "scores.jsonl").exists()  # nothing scored
    assert not (tiny_run / "evaluation_stats.json").exists()


def test_plugins_params_lists_a_judges_parameters_with_its_own_defaults(tmp_path):
    proc = run_cli(
        "plugins", "--params", "--json", "judge=omni-gemma4-12b", cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)["judge/omni-gemma4-12b"]}
    assert (rows["seed"]["default"], rows["max_new_tokens"]["default"]) == (1234, 2048)
    assert rows["swap_space"]["default"] == 8.0 and rows["swap_space"]["runtime"] is True
    assert rows["temperature"]["runtime"] is False and rows["temperature"]["doc"]
    assert all(r["doc"] for r in rows.values())
