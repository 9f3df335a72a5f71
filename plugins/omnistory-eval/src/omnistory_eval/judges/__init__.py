"""LLM-as-a-judge (paper App. E.3-E.5): four tracks x three judges, validation and JSON repair.

Public API::

    render_prompt(judge_id, item) -> RenderedPrompt      # exactly what a judge receives
    render_messages(judge_id, item) -> list[dict]
    parse_judge_response(raw, track) -> JudgeParse        # .scores, .rationales, .failure
    repair_stage(results, repairer) -> RepairStageResult  # stage-end repair pass
    RepairModel(backend="vllm"|"openai", **params)        # the paper's repair model
    JUDGE_SPECS, PANELS, CRITERIA                         # Table 6, App. F.6, App. E.4 keys
    PAPER_JUDGES, HOSTED_JUDGES                           # the Judge component classes

Nothing here imports torch, vLLM or the OpenAI SDK at import time.
"""

from omnistory_eval.judges.judge import (
    HOSTED_JUDGES,
    JUDGE_PROTOCOL_VERSION,
    PAPER_JUDGES,
    PaperJudge,
    result_from_generation,
)
from omnistory_eval.judges.parsing import JudgeParse, parse_judge_response
from omnistory_eval.judges.render import (
    JudgeInputError,
    RenderedPrompt,
    render_messages,
    render_prompt,
)
from omnistory_eval.judges.repair import (
    RepairModel,
    RepairRequest,
    RepairStageResult,
    apply_repair,
    repair_stage,
    unsupported_scores,
)
from omnistory_eval.judges.rubric import CRITERIA, TRACKS, criteria_for
from omnistory_eval.judges.specs import (
    HOSTED_SPECS,
    JUDGE_SPECS,
    PANELS,
    REPAIR_SPEC,
    JudgeSpec,
    judge_spec,
)

__all__ = [
    "CRITERIA",
    "HOSTED_JUDGES",
    "HOSTED_SPECS",
    "JUDGE_PROTOCOL_VERSION",
    "JUDGE_SPECS",
    "JudgeInputError",
    "JudgeParse",
    "JudgeSpec",
    "PANELS",
    "PAPER_JUDGES",
    "PaperJudge",
    "REPAIR_SPEC",
    "RenderedPrompt",
    "RepairModel",
    "RepairRequest",
    "RepairStageResult",
    "TRACKS",
    "apply_repair",
    "criteria_for",
    "judge_spec",
    "parse_judge_response",
    "render_messages",
    "render_prompt",
    "repair_stage",
    "result_from_generation",
    "unsupported_scores",
]
