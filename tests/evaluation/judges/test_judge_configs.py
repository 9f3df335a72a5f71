"""Judge configs: each judge's node generated from its spec (no yaml), the panels of App. F.6
(conf/judge), all twelve."""

from __future__ import annotations

from pathlib import Path

import pluggy
import pytest
import yaml
from omnistory_eval import plugin
from omnistory_eval.evaluators import build_evaluators, evaluator_config
from omnistory_eval.judges import (
    CRITERIA,
    HOSTED_JUDGES,
    HOSTED_SPECS,
    JUDGE_SPECS,
    PANELS,
    PAPER_JUDGES,
)
from omnistory_eval.judges.backends.base import Decoding
from omnistory_eval.judges.backends.vllm_offline import engine_arguments

from omnistory_core import hookspecs
from omnistory_core.components import EVALUATION_INPUTS, Judge

EVAL_CONF = Path(__file__).resolve().parents[3] / "plugins/omnistory-eval/src/omnistory_eval/conf"
CONF = EVAL_CONF / "judge"

TABLE_6 = {  # checkpoint: (track, backend, context limit, max output tokens), typed from the paper
    "Qwen/Qwen3-30B-A3B-Instruct-2507": ("text", "vllm", 8192, 1024),
    "ByteDance-Seed/Seed-OSS-36B-Instruct": ("text", "vllm", 8192, 1024),
    "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5": ("text", "vllm", 8192, 1024),
    "Qwen/Qwen3-VL-32B-Instruct": ("image", "vllm", 20000, 1024),
    "OpenGVLab/InternVL3_5-38B-Instruct": ("image", "vllm", 20000, 1024),
    "LGAI-EXAONE/EXAONE-4.5-33B": ("image", "vllm", 20000, 1024),
    "nvidia/audio-flamingo-next-hf": ("speech", "transformers", None, 1024),
    "OpenMOSS-Team/MOSS-Audio-8B-Instruct": ("speech", "vllm", 32768, 1024),
    "moonshotai/Kimi-Audio-7B-Instruct": ("speech", "vllm", 8192, 1024),
    "Qwen/Qwen3-Omni-30B-A3B-Instruct": ("omni", "vllm", 32768, 2048),
    "nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-BF16": ("omni", "vllm", 32768, 2048),
    "google/gemma-4-12B-it": ("omni", "vllm", 32768, 2048),
}


def load(name: str) -> dict:
    return yaml.safe_load((CONF / f"{name}.yaml").read_text(encoding="utf-8"))


def test_specs_match_table_6():
    got = {
        s.checkpoint: (s.track, s.backend, s.context_limit, s.max_new_tokens)
        for s in JUDGE_SPECS.values()
    }
    assert got == TABLE_6
    for spec in JUDGE_SPECS.values():
        assert spec.seed == (1234 if spec.track == "omni" else 0)
        d = spec.decoding()
        assert (d["temperature"], d["top_p"], d["repetition_penalty"]) == (0.0, 1.0, 1.0)


def test_panels_follow_appendix_f6():
    assert PANELS == {
        "A": (
            "text-qwen3-30b-a3b",
            "image-qwen3-vl-32b",
            "speech-audio-flamingo-next",
            "omni-qwen3-omni-30b",
        ),
        "B": (
            "text-seed-oss-36b",
            "image-internvl35-38b",
            "speech-moss-audio-8b",
            "omni-nemotron3-nano-omni",
        ),
        "C": (
            "text-llama-nemotron-49b",
            "image-exaone45-33b",
            "speech-kimi-audio-7b",
            "omni-gemma4-12b",
        ),
    }
    for panel, ids in PANELS.items():
        assert load(f"panel_{panel.lower()}")["judges"] == list(ids)
    assert load("all")["judges"] == list(JUDGE_SPECS)
    assert len(load("all")["judges"]) == 12


@pytest.mark.parametrize("judge_id", [*JUDGE_SPECS, *HOSTED_SPECS])
def test_each_judge_config_is_generated_from_its_spec(judge_id):
    spec = JUDGE_SPECS.get(judge_id) or HOSTED_SPECS[judge_id]
    assert not (CONF / f"{judge_id}.yaml").exists()  # the declaration is the only source
    cfg = evaluator_config("judge", judge_id, [])
    assert cfg["name"] == judge_id
    assert cfg["backend"] == spec.backend
    assert cfg["seed"] == spec.seed  # explicit: the engine would otherwise inject the run seed
    assert cfg["max_new_tokens"] == spec.max_new_tokens
    assert cfg["swap_space"] == 8.0  # App. E.3.1, for every vLLM judge
    assert cfg["api_key_env"] == (None if spec.checkpoint else "OPENAI_API_KEY")
    assert cfg["repair"] == {
        "backend": None,  # the judge's: its own server for backend=openai, else vllm
        "base_url": None,
        "model": None,
        "api_key_env": None,
        "concurrency": None,
    }
    [judge] = build_evaluators([], [judge_id], [])
    assert judge.batch_size == spec.batch_size
    assert judge.params["vllm_extras"] is spec.vllm_extras


def test_judge_classes_declare_the_contract():
    assert len(PAPER_JUDGES) == 12 and len(HOSTED_JUDGES) == 4
    for cls in (*PAPER_JUDGES, *HOSTED_JUDGES):
        assert issubclass(cls, Judge) and cls.kind == "judge"
        assert cls.criteria == CRITERIA[cls.track]
        assert set(cls.reads) <= set(EVALUATION_INPUTS)
        assert cls.name == cls.spec.id
    assert {c.name for c in PAPER_JUDGES} == set(JUDGE_SPECS)


def test_runtime_params_stay_out_of_the_cache_key():
    cls = PAPER_JUDGES[0]
    a = cls(backend="openai", base_url="http://a/v1", concurrency=4, repair={"backend": "vllm"})
    b = cls(backend="vllm", gpu_memory_utilization=0.8, swap_space=None, timeout=5)
    assert a.output_params() == b.output_params() == {"max_new_tokens": 1024, "seed": 0}
    assert cls(seed=5).output_params() == {"max_new_tokens": 1024, "seed": 5}


def test_the_config_seed_reaches_the_decoding():
    cfg = evaluator_config("judge", "omni-gemma4-12b", [])
    params = {k: v for k, v in cfg.items() if k != "name"}
    assert Decoding.from_spec(JUDGE_SPECS["omni-gemma4-12b"], params).seed == 1234


def test_plugin_registers_every_judge_through_the_hook():
    pm = pluggy.PluginManager("omnistory")
    pm.add_hookspecs(hookspecs)
    pm.register(plugin)
    registered = []
    pm.hook.register_judges(register=registered.append)
    assert registered == [*PAPER_JUDGES, *HOSTED_JUDGES]


def test_vllm_engine_arguments_follow_the_paper():
    text = engine_arguments(JUDGE_SPECS["text-llama-nemotron-49b"], {})
    assert text == {
        "model": "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5",
        "dtype": "bfloat16",
        "tensor_parallel_size": 1,
        "gpu_memory_utilization": 0.9,
        "max_num_seqs": 16,
        "seed": 0,
        "trust_remote_code": True,
        "max_model_len": 8192,
        "swap_space": 8.0,  # App. E.3.1: 8 GiB of swap space
    }
    image = engine_arguments(JUDGE_SPECS["image-qwen3-vl-32b"], {})
    assert image["limit_mm_per_prompt"] == {"image": 3, "video": 0}
    assert (image["max_model_len"], image["max_num_seqs"]) == (20000, 4)
    moss = engine_arguments(JUDGE_SPECS["speech-moss-audio-8b"], {"swap_space": 8})
    assert moss["mm_processor_kwargs"] == {"enable_time_marker": True}
    assert moss["limit_mm_per_prompt"] == {"audio": 1, "image": 0, "video": 0}
    assert (moss["max_model_len"], moss["max_num_seqs"], moss["swap_space"]) == (32768, 1, 8.0)
    omni = engine_arguments(JUDGE_SPECS["omni-nemotron3-nano-omni"], {"seed": 1234})
    assert omni["limit_mm_per_prompt"] == {"image": 3, "audio": 1, "video": 0}
    assert (omni["gpu_memory_utilization"], omni["seed"], omni["max_model_len"]) == (
        0.95,
        1234,
        32768,
    )


def test_hydra_composes_a_judge_config():
    """A judge's node is composed on its own (``judge/<id>``), generated from its declaration."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="omnistory_core.conf", version_base="1.3"):
            cfg = compose(
                config_name="judge/omni-qwen3-omni-30b",
                overrides=["judge.backend=openai", "judge.base_url=http://127.0.0.1:8000/v1"],
            )
    finally:
        GlobalHydra.instance().clear()
    data = OmegaConf.to_container(cfg, resolve=True)
    data = data.get("judge", data)
    assert data["name"] == "omni-qwen3-omni-30b"
    assert (data["backend"], data["base_url"], data["seed"]) == (
        "openai",
        "http://127.0.0.1:8000/v1",
        1234,
    )


def test_importing_the_judges_loads_no_heavy_stack():
    code = (
        "import sys, omnistory_eval.judges, omnistory_eval.plugin, "
        "omnistory_eval.judges.command\n"
        "heavy = [m for m in ('torch', 'transformers', 'vllm', 'openai') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
