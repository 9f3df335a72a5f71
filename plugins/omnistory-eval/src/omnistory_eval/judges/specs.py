"""The judge checkpoints, their framing and their paper settings (Table 6, App. E.3.1, E.4, F.6).

One :class:`JudgeSpec` per judge of the paper plus the JSON-repair model: a judge is a preset of
backend, checkpoint and prompt framing, so its identity lives here, in code next to the framing it
selects.  Each judge component declares its parameters from its spec
(:data:`omnistory_eval.judges.judge.JUDGE_PARAMETERS` with the spec's backend, seed and
answer length as defaults); no yaml repeats them, and ``--set judge.<id>.<key>=value`` overrides
one for a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# framing ids (see framing.py)
CANONICAL = "canonical"
INTERNVL = "internvl"
GEMMA4 = "gemma4"
MOSS_AUDIO = "moss_audio"
KIMI_AUDIO = "kimi_audio"

TEMPERATURE = 0.0
TOP_P = 1.0
REPETITION_PENALTY = 1.0
#: App. E.3.1: "The reported vLLM runs use bfloat16 weights, tensor parallel size 1, and 8 GiB of
#: swap space." (the repair model too, App. E.3.3)
PAPER_SWAP_SPACE_GIB = 8.0


@dataclass(frozen=True)
class JudgeSpec:
    """Everything that identifies one judge and how the paper ran it."""

    id: str
    track: str
    checkpoint: str
    title: str
    panel: str | None
    backend: str = "vllm"  # the paper's backend: "vllm" or "transformers"
    context_limit: int | None = 8192  # None: the model default (Audio Flamingo Next)
    max_new_tokens: int = 1024
    seed: int = 0
    batch_size: int = 16
    max_num_seqs: int = 16
    gpu_memory_utilization: float = 0.9
    framing: str = CANONICAL
    system_directive: str | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    json_schema_constrained: bool = False
    stop_token_ids: tuple[int, ...] = ()
    trust_remote_code: bool = False
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    vllm_extras: bool = True  # OpenAI-compatible calls may carry vLLM's non-OpenAI fields

    def decoding(self) -> dict[str, Any]:
        """The first-pass decoding settings shared by all backends."""
        return {
            "temperature": TEMPERATURE,
            "top_p": TOP_P,
            "repetition_penalty": REPETITION_PENALTY,
            "seed": self.seed,
            "max_new_tokens": self.max_new_tokens,
        }


_TEXT: dict[str, Any] = {"context_limit": 8192, "batch_size": 16, "max_num_seqs": 16}
_IMAGE: dict[str, Any] = {"context_limit": 20000, "batch_size": 4, "max_num_seqs": 4}
_SPEECH_VLLM: dict[str, Any] = {"batch_size": 1, "max_num_seqs": 1}
_OMNI: dict[str, Any] = {
    "context_limit": 32768,
    "batch_size": 4,
    "max_num_seqs": 4,
    "max_new_tokens": 2048,
    "seed": 1234,
    "gpu_memory_utilization": 0.95,
}
_NO_THINKING: dict[str, Any] = {"enable_thinking": False}

JUDGE_SPECS: dict[str, JudgeSpec] = {
    spec.id: spec
    for spec in (
        # -- text (E.4.1) --
        JudgeSpec(
            id="text-qwen3-30b-a3b",
            track="text",
            checkpoint="Qwen/Qwen3-30B-A3B-Instruct-2507",
            title="Qwen3-30B-A3B-Instruct-2507",
            panel="A",
            engine_kwargs={"enable_expert_parallel": True},
            **_TEXT,
        ),
        JudgeSpec(
            id="text-seed-oss-36b",
            track="text",
            checkpoint="ByteDance-Seed/Seed-OSS-36B-Instruct",
            title="Seed-OSS-36B-Instruct",
            panel="B",
            chat_template_kwargs={"thinking_budget": 0},
            **_TEXT,
        ),
        JudgeSpec(
            id="text-llama-nemotron-49b",
            track="text",
            checkpoint="nvidia/Llama-3_3-Nemotron-Super-49B-v1_5",
            title="Llama-3.3-Nemotron-Super-49B-v1.5",
            panel="C",
            system_directive="/no_think",
            trust_remote_code=True,
            **_TEXT,
        ),
        # -- image (E.4.2) --
        JudgeSpec(
            id="image-qwen3-vl-32b",
            track="image",
            checkpoint="Qwen/Qwen3-VL-32B-Instruct",
            title="Qwen3-VL-32B-Instruct",
            panel="A",
            **_IMAGE,
        ),
        JudgeSpec(
            id="image-internvl35-38b",
            track="image",
            checkpoint="OpenGVLab/InternVL3_5-38B-Instruct",
            title="InternVL3.5-38B-Instruct",
            panel="B",
            framing=INTERNVL,
            trust_remote_code=True,
            **_IMAGE,
        ),
        JudgeSpec(
            id="image-exaone45-33b",
            track="image",
            checkpoint="LGAI-EXAONE/EXAONE-4.5-33B",
            title="EXAONE-4.5-33B",
            panel="C",
            chat_template_kwargs=dict(_NO_THINKING),
            **_IMAGE,
        ),
        # -- speech (E.4.3) --
        JudgeSpec(
            id="speech-audio-flamingo-next",
            track="speech",
            checkpoint="nvidia/audio-flamingo-next-hf",
            title="Audio Flamingo Next",
            panel="A",
            backend="transformers",
            context_limit=None,  # 131072 is the model default; the harness does not override it
            batch_size=1,
            max_num_seqs=1,
        ),
        JudgeSpec(
            id="speech-moss-audio-8b",
            track="speech",
            checkpoint="OpenMOSS-Team/MOSS-Audio-8B-Instruct",
            title="MOSS-Audio-8B-Instruct",
            panel="B",
            context_limit=32768,
            framing=MOSS_AUDIO,
            engine_kwargs={"mm_processor_kwargs": {"enable_time_marker": True}},
            **_SPEECH_VLLM,
        ),
        JudgeSpec(
            id="speech-kimi-audio-7b",
            track="speech",
            checkpoint="moonshotai/Kimi-Audio-7B-Instruct",
            title="Kimi-Audio-7B-Instruct",
            panel="C",
            context_limit=8192,
            framing=KIMI_AUDIO,
            stop_token_ids=(151644,),
            trust_remote_code=True,
            **_SPEECH_VLLM,
        ),
        # -- integrated (E.4.4) --
        JudgeSpec(
            id="omni-qwen3-omni-30b",
            track="omni",
            checkpoint="Qwen/Qwen3-Omni-30B-A3B-Instruct",
            title="Qwen3-Omni-30B-A3B-Instruct",
            panel="A",
            engine_kwargs={"enable_expert_parallel": True},
            **_OMNI,
        ),
        JudgeSpec(
            id="omni-nemotron3-nano-omni",
            track="omni",
            checkpoint="nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-BF16",
            title="Nemotron-3-Nano-Omni-30B-A3B",
            panel="B",
            chat_template_kwargs=dict(_NO_THINKING),
            trust_remote_code=True,
            engine_kwargs={"enable_expert_parallel": True},
            **_OMNI,
        ),
        JudgeSpec(
            id="omni-gemma4-12b",
            track="omni",
            checkpoint="google/gemma-4-12B-it",
            title="Gemma-4-12B-it",
            panel="C",
            framing=GEMMA4,
            chat_template_kwargs=dict(_NO_THINKING),
            json_schema_constrained=True,
            engine_kwargs={"mm_processor_kwargs": {"max_soft_tokens": 1120}},
            **_OMNI,
        ),
    )
}

#: The stage-end JSON-repair model (Table 6, App. E.3.1 "JSON repair").
REPAIR_SPEC = JudgeSpec(
    id="repair-qwen3-30b-a3b",
    track="text",  # the repair prompt is text only; the schema is the originating judge's track
    checkpoint="Qwen/Qwen3-30B-A3B-Instruct-2507",
    title="Qwen3-30B-A3B-Instruct-2507 (JSON repair)",
    panel=None,
    engine_kwargs={"enable_expert_parallel": True},
    **_TEXT,
)

#: Optional alternatives: any hosted chat API (OpenAI-compatible wire format), canonical prompts
#: without model-specific framing; the served model is the `model` parameter.  Not in the panels.
HOSTED_SPECS: dict[str, JudgeSpec] = {
    f"{track}-hosted": JudgeSpec(
        id=f"{track}-hosted",
        track=track,
        checkpoint="",
        title=f"hosted API ({track})",
        panel=None,
        backend="openai",
        context_limit=None,
        max_new_tokens=2048 if track == "omni" else 1024,
        seed=1234 if track == "omni" else 0,
        batch_size=8,
        max_num_seqs=8,
        vllm_extras=False,
    )
    for track in ("text", "image", "speech", "omni")
}

#: App. F.6: one judge per track, in text / image / speech / integrated order.
PANELS: dict[str, tuple[str, ...]] = {
    p: tuple(s.id for s in JUDGE_SPECS.values() if s.panel == p) for p in ("A", "B", "C")
}


def judge_spec(judge_id: str) -> JudgeSpec:
    """Look up a judge by id; the error lists the known ids."""
    spec = JUDGE_SPECS.get(judge_id) or HOSTED_SPECS.get(judge_id)
    if spec is None:
        known = ", ".join([*JUDGE_SPECS, *HOSTED_SPECS])
        raise KeyError(f"unknown judge {judge_id!r}; known judges: {known}")
    return spec


def judges_of_track(track: str) -> tuple[str, ...]:
    return tuple(s.id for s in JUDGE_SPECS.values() if s.track == track)
