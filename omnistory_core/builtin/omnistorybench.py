"""Omni-StoryBench as a task: the first benchmark through the ``register_tasks`` hook.

Its contract (``StoryExample``, ``Plan``, ``PageOutput``) and plan schema stay in the core, as the
design says; what is specific to its scoring is declared here, and the evaluation and report
distributions read it from the task (the judge rubric's tracks and criteria, the leaderboard's
columns and its 7-part Total) instead of fixing it in generic modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omnistory_core.builtin.omnistorybench_inputs import INPUTS as INPUT_DOCS
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
    fixture="demo",
    input_docs=INPUT_DOCS,
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
        # every table and figure the report writes, in its order: the report's registry
        # (omnistory_report.registry.PAPER_TABLES), which tests/report/test_report_registry.py
        # keeps equal to this list
        PaperTable("leaderboard", "Leaderboard (valid-only and zero-filled)"),
        PaperTable("judge_coverage", "Judge coverage"),
        PaperTable("criterion_scores_text", "Valid-only text-judge scores per criterion"),
        PaperTable("criterion_scores_image", "Valid-only image-judge scores per criterion"),
        PaperTable("criterion_scores_speech", "Valid-only speech-judge scores per criterion"),
        PaperTable("criterion_scores_omni", "Valid-only omni-judge scores per criterion"),
        PaperTable(
            "supplementary_metrics", "Supplementary metrics outside Total Average, valid-only"
        ),
        PaperTable("length_per_system", "Generated narration length per system", ("run_dir",)),
        PaperTable("paradigm_means", "Mean Total Average by paradigm", ("scores", "run_dir")),
        PaperTable(
            "correlations_valid", "Pearson correlations between modality scores (valid-only)"
        ),
        PaperTable(
            "partial_correlations_valid", "Partial correlations of modality scores (valid-only)"
        ),
        PaperTable("bottleneck_valid", "Modality-bottleneck diagnostics (valid-only)"),
        PaperTable(
            "bottleneck_systems", "Within-modality ranks and weakest-modality gaps (valid-only)"
        ),
        PaperTable(
            "bottleneck_cutoffs", "Max Total among configurations with p <= alpha (valid-only)"
        ),
        PaperTable(
            "correlations_zero", "Pearson correlations between modality scores (zero-filled)"
        ),
        PaperTable(
            "partial_correlations_zero", "Partial correlations of modality scores (zero-filled)"
        ),
        PaperTable("bottleneck_zero", "Modality-bottleneck diagnostics (zero-filled)"),
        PaperTable("bootstrap_totals", "Paired bootstrap of Total Average"),
        PaperTable("bootstrap_pairs", "Paired differences of Total Average (Holm)"),
        PaperTable(
            "bootstrap_correlations", "Transition-bootstrap intervals of modality correlations"
        ),
        PaperTable("judge_agreement_system", "System-level agreement between judges of a track"),
        PaperTable("judge_agreement_items", "Item-level agreement on jointly valid items"),
        PaperTable("panel_agreement", "Agreement between judge panels"),
        PaperTable("judge_calibration", "Judge means and between-system SD"),
        PaperTable(
            "covariance_shares", "Component ranges, SDs and covariance shares of Total Average"
        ),
        PaperTable("aggregation_variants", "Alternative aggregation rules vs equal weights"),
        PaperTable("weights_dirichlet", "Random Dirichlet(1,...,1) weights"),
        PaperTable("weights_dirichlet_winners", "Share of Dirichlet weight draws each system wins"),
        PaperTable("weights_uniform", "Random normalised U(0.5, 2) weights"),
        PaperTable("weights_uniform_winners", "Share of U(0.5, 2) weight draws each system wins"),
        PaperTable(
            "length_correlations",
            "Narration length vs text judge and BERTScore",
            ("scores", "run_dir"),
        ),
        PaperTable("failures", "Failed outputs per system, modality and category", ("run_dir",)),
        PaperTable("fig_narration_lengths", "Narration length per system", ("run_dir",)),
        PaperTable("fig3_total_ranking", "Total Average ranking by paradigm"),
        PaperTable("fig4_missing_outputs", "JSON errors and missing outputs"),
        PaperTable("fig13_valid_vs_zero", "Valid-only vs zero-filled"),
        PaperTable("fig_modality_correlations", "Modality correlation heatmap"),
        PaperTable("fig6_image_categories", "Image-judge scores by category"),
        PaperTable("table01_modality_correlations", "Pearson correlations between modality scores"),
        PaperTable(
            "table02_bottleneck_diagnostics", "Modality-bottleneck diagnostics (valid-only)"
        ),
        PaperTable("table03_partial_correlations", "Partial correlations between modality scores"),
        PaperTable(
            "table04_partial_correlations_restricted",
            "Partial correlations, semi+any-to-any",
            ("scores", "run_dir"),
        ),
        PaperTable("table05_dataset_sources", "Sources of Omni-StoryBench", ()),
        PaperTable("table06_judge_checkpoints", "Judge checkpoints and context limits", ()),
        PaperTable("table07_bertscore_text_judge", "BERTScore vs the text judge (system level)"),
        PaperTable("table08_dreamsim_correlations", "Mean DreamSim distance vs system scores"),
        PaperTable(
            "table09_integrated_correlations", "Integrated judge vs modality scores (and DreamSim)"
        ),
        PaperTable(
            "table10_integrated_partial_correlations", "Integrated judge partial correlations"
        ),
        PaperTable(
            "table11_integrated_category_diagnostics", "Integrated-judge category diagnostics"
        ),
        PaperTable(
            "table12_integrated_category_partials", "Integrated categories vs modalities (partial)"
        ),
        PaperTable(
            "table13_paradigm_means",
            "Mean Total Average by paradigm, both policies",
            ("scores", "run_dir"),
        ),
        PaperTable(
            "table14_availability_totals", "Missing candidates and Total Average, both policies"
        ),
        PaperTable(
            "table15_bottleneck_diagnostics_zero", "Modality-bottleneck diagnostics (zero-filled)"
        ),
        PaperTable(
            "table16_partial_correlations_policies", "Modality partial correlations, both policies"
        ),
        PaperTable(
            "table17_integrated_partials_policies", "Integrated partial correlations, both policies"
        ),
        PaperTable("table18_human_counts", "Human-evaluation counts", ("scores", "human")),
        PaperTable(
            "table19_human_judge_agreement",
            "Human ratings vs three-judge means",
            ("scores", "human"),
        ),
        PaperTable(
            "table20_human_paradigm_means",
            "Human four-track composite by paradigm",
            ("scores", "human", "run_dir"),
        ),
        PaperTable(
            "table21_human_window_diagnostics",
            "Inter-annotator alpha and window sensitivity",
            ("scores", "human"),
        ),
        PaperTable(
            "table22_panel_agreement", "System-level agreement between judge panels A, B, C"
        ),
        PaperTable("table23_judge_item_agreement", "Item-level agreement on jointly valid items"),
        PaperTable("table24_bootstrap_totals", "Valid-only totals with paired-bootstrap intervals"),
        PaperTable("table25_bootstrap_pairs", "Paired comparisons of Total Average (Holm)"),
        PaperTable(
            "table26_bootstrap_correlations", "Transition-bootstrap intervals of associations"
        ),
        PaperTable("table27_covariance_shares", "Component ranges, SDs and covariance shares"),
        PaperTable(
            "table28_aggregation_sensitivity", "Aggregation rules and length controls vs equal"
        ),
        PaperTable("table29_valid_only_results", "Valid-only results (the seven components)"),
        PaperTable("table30_narration_length", "Generated narration length", ("run_dir",)),
        PaperTable("table31_speech_metadata_accuracy", "Speech metadata accuracy per field (%)"),
        PaperTable("table32_dreamsim_per_system", "DreamSim distance per system (valid images)"),
        PaperTable(
            "integrated_category_paradigm_means", "Integrated-judge category means per paradigm"
        ),
        PaperTable("speech_field_accuracy", "Speech metadata accuracy per field and system"),
        PaperTable("figure01_overview", "Overview of Omni-StoryBench", ()),
        PaperTable("figure02_baseline_systems", "Overview of the baseline system paradigms", ()),
        PaperTable("figure03_total_ranking", "Total Average ranking by paradigm"),
        PaperTable("figure04_missing_outputs", "JSON errors and missing outputs per modality"),
        PaperTable("figure05_text_metrics", "Comparison of text evaluation metrics"),
        PaperTable("figure06_image_categories", "Image-judge scores by category and paradigm"),
        PaperTable("figure07_judge_distributions", "Modality-wise judge score distributions"),
        PaperTable("figure08_example_harmonica", "An Omni-StoryBench example", ()),
        PaperTable("figure09_example_baby_fish", "An Omni-StoryBench example", ()),
        PaperTable("figure10_filtering_interface", "Annotation interface for filtering", ()),
        PaperTable("figure11_audit_interface", "Annotation interface for auditing", ()),
        PaperTable(
            "figure12_integrated_category_diagnostics", "Integrated-judge category diagnostics"
        ),
        PaperTable("figure13_valid_vs_zero", "Total Average, valid-only vs zero-filled"),
        PaperTable(
            "figure14_zero_filled_ranking", "Total Average ranking under zero-filled scoring"
        ),
    ),
    load=_load,
)
