"""Omni-StoryBench as a task: the first benchmark through the ``register_tasks`` hook.

Its contract (``StoryExample``, ``Plan``, ``PageOutput``) and plan schema stay in the core, as the
design says; what is specific to its scoring is declared here, and the evaluation and report
distributions read it from the task (the judge rubric's tracks and criteria, the leaderboard's
columns and its 7-part Total) instead of fixing it in generic modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omnistory_core.components import EXAMPLE_INPUTS, PLAN_INPUTS, REFERENCE_INPUTS
from omnistory_core.tasks import Aggregation, Column, OutputSlot, PaperTable, Task, Track

#: the four rubric criteria of each judge track (paper App. E.3-E.4)
CRITERIA: dict[str, tuple[str, ...]] = {
    "text": (
        "alignment_with_metadata",
        "natural_flow_from_current_narration",
        "satisfaction_of_generation_conditions",
        "semantic_consistency_with_ground_truth",
    ),
    "image": (
        "alignment_with_metadata",
        "visual_narrative_continuity_from_current_scene",
        "satisfaction_of_generation_conditions",
        "semantic_consistency_with_ground_truth",
    ),
    "speech": (
        "alignment_with_metadata",
        "naturalness_and_conversational_relevance",
        "satisfaction_of_generation_conditions",
        "semantic_consistency_and_persona_match_with_ground_truth",
    ),
    "omni": (
        "alignment_with_metadata",
        "natural_multimodal_continuity_from_current_page",
        "satisfaction_of_generation_conditions",
        "multimodal_semantic_consistency_with_ground_truth",
    ),
}

#: automatic metric -> (track, the criteria that must all be ok for an example to be valid)
METRIC_CELLS: dict[str, tuple[str, tuple[str, ...]]] = {
    "bertscore": ("text", ("f1",)),
    "clip": ("image", ("cosine",)),
    "speech_meta": ("speech", ("emotion", "speed", "pitch", "gender")),
}

#: the modalities a system makes per transition (the tracks whose outputs can be missing)
OUTPUT_TRACKS: tuple[str, ...] = ("text", "image", "speech")


def _load(spec: Mapping[str, Any]) -> list[Any]:
    from omnistory_core import data

    return data.load_dataset(spec)


OMNISTORYBENCH = Task(
    name="omnistorybench",
    version="1",
    description=(
        "Omni-StoryBench: continue a storybook page, f(x_i, t_i, c_{i+1}) -> "
        "(image, narration, speech)"
    ),
    datasets=("demo", "omnistorybench"),
    record="omnistory_core.contract.StoryExample",
    inputs=(*EXAMPLE_INPUTS, *PLAN_INPUTS),
    reference_inputs=REFERENCE_INPUTS,
    outputs=(
        OutputSlot("text", "text"),
        OutputSlot("image", "image"),
        OutputSlot("speech", "speech"),
    ),
    layout="candidate: text/<i>/generated.txt, image/<i>/generated.png, speech/<i>/generated.wav",
    systems=("orchestration", "semi-orchestration (T+I)", "semi-orchestration (T+S)", "any-to-any"),
    tracks=tuple(Track(track, criteria) for track, criteria in CRITERIA.items()),
    evaluators={"bertscore": "item", "clip": "item", "speech_meta": "item"},
    aggregation=Aggregation(
        columns=(
            Column("BERTScore", "bertscore", "f1", "text", scale=10.0),
            Column("CLIP", "clip", "cosine", "image", scale=10.0),
            Column("Meta", "speech_meta", "", "speech", scale=10.0),
            Column("J_t", "judge", "", "text"),
            Column("J_i", "judge", "", "image"),
            Column("J_s", "judge", "", "speech"),
            Column("J_o", "judge", "", "omni"),
        ),
        derived={
            "total": "(10*BERTScore + 10*CLIP + 10*Meta + J_t + J_i + J_s + J_o) / 7",
            "text_score": "(10*BERTScore + J_t) / 2",
            "image_score": "(10*CLIP + J_i) / 2",
            "speech_score": "(10*Meta + J_s) / 2",
        },
    ),
    tables=(
        PaperTable("leaderboard", "Leaderboard (valid-only and zero-filled)"),
        PaperTable("failures", "Failure counts per category (Figure 4 / Table 14)", ("run_dir",)),
    ),
    load=_load,
)
