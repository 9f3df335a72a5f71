"""The paper's numbered tables and figures: a registry, and every table computable from scores.

:data:`PAPER_TABLES` and :data:`PAPER_FIGURES` list every table and figure of the paper with its
file stem (``table08_dreamsim_correlations``).  :func:`compute_paper_tables` returns, for each
table, either a :class:`StatTable` or the reason it is absent (``"no DreamSim rows"``); the report
writes them under their paper names together with an index.  Tables that need more than a scores
table say what is missing (the run directory for narration lengths and paradigms, human ratings —
``kind: human`` rows from ``human import`` — for Tables 18–21, see :mod:`.human`).  Comparisons
across systems leave oracle systems out, as in :func:`compute_statistics`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import pandas as pd

from omnistory_report.analysis import automatic, categories, dreamsim
from omnistory_report.analysis.bottleneck import MODALITIES
from omnistory_report.analysis.cube import JUDGE_TRACKS, ScoreCube, select_systems
from omnistory_report.analysis.human import HumanStudy, human_tables
from omnistory_report.analysis.leaderboard import (
    COMPONENTS,
    criterion_scores,
    modality_frame,
    scaled_components,
)
from omnistory_report.analysis.length_controls import (
    length_variant_rows,
    text_judge_length_controls,
)
from omnistory_report.analysis.statistics import StatTable

NO_HUMAN = "no human ratings (see `human import`)"
NO_PARADIGMS = "no paradigms known (they come from the run directory's manifests: pass --run-dir)"
NO_LENGTHS = "no generated narrations (they come from the run directory: pass --run-dir)"


@dataclass(frozen=True)
class PaperItem:
    """One numbered table or figure of the paper."""

    kind: str  # "table" or "figure"
    number: int
    slug: str
    caption: str
    section: str

    @property
    def label(self) -> str:
        return f"{self.kind.capitalize()} {self.number}"

    @property
    def stem(self) -> str:
        return f"{self.kind}{self.number:02d}_{self.slug}"


def _t(number: int, slug: str, caption: str, section: str) -> PaperItem:
    return PaperItem("table", number, slug, caption, section)


def _f(number: int, slug: str, caption: str, section: str) -> PaperItem:
    return PaperItem("figure", number, slug, caption, section)


PAPER_TABLES: tuple[PaperItem, ...] = (
    _t(1, "modality_correlations", "Pearson correlations between modality scores", "6.1"),
    _t(2, "bottleneck_diagnostics", "Modality-bottleneck diagnostics (valid-only)", "6.1, E.6"),
    _t(3, "partial_correlations", "Partial correlations between modality scores", "6.1"),
    _t(4, "partial_correlations_restricted", "Partial correlations, semi+any-to-any", "6.1"),
    _t(5, "dataset_sources", "Sources of Omni-StoryBench", "C"),
    _t(6, "judge_checkpoints", "Judge checkpoints and context limits", "E.3"),
    _t(7, "bertscore_text_judge", "BERTScore vs the text judge (system level)", "F.1"),
    _t(8, "dreamsim_correlations", "Mean DreamSim distance vs system scores", "F.2"),
    _t(9, "integrated_correlations", "Integrated judge vs modality scores (and DreamSim)", "F.3"),
    _t(10, "integrated_partial_correlations", "Integrated judge partial correlations", "F.3"),
    _t(11, "integrated_category_diagnostics", "Integrated-judge category diagnostics", "F.3"),
    _t(12, "integrated_category_partials", "Integrated categories vs modalities (partial)", "F.3"),
    _t(13, "paradigm_means", "Mean Total Average by paradigm, both policies", "F.4"),
    _t(14, "availability_totals", "Missing candidates and Total Average, both policies", "F.4"),
    _t(15, "bottleneck_diagnostics_zero", "Modality-bottleneck diagnostics (zero-filled)", "F.4"),
    _t(16, "partial_correlations_policies", "Modality partial correlations, both policies", "F.4"),
    _t(17, "integrated_partials_policies", "Integrated partial correlations, both policies", "F.4"),
    _t(18, "human_counts", "Human-evaluation counts", "F.5"),
    _t(19, "human_judge_agreement", "Human ratings vs three-judge means", "F.5"),
    _t(20, "human_paradigm_means", "Human four-track composite by paradigm", "F.5"),
    _t(21, "human_window_diagnostics", "Inter-annotator alpha and window sensitivity", "F.5"),
    _t(22, "panel_agreement", "System-level agreement between judge panels A, B, C", "F.6"),
    _t(23, "judge_item_agreement", "Item-level agreement on jointly valid items", "F.6"),
    _t(24, "bootstrap_totals", "Valid-only totals with paired-bootstrap intervals", "F.7"),
    _t(25, "bootstrap_pairs", "Paired comparisons of Total Average (Holm)", "F.7"),
    _t(26, "bootstrap_correlations", "Transition-bootstrap intervals of associations", "F.7"),
    _t(27, "covariance_shares", "Component ranges, SDs and covariance shares", "F.8"),
    _t(28, "aggregation_sensitivity", "Aggregation rules and length controls vs equal", "F.8"),
    _t(29, "valid_only_results", "Valid-only results (the seven components)", "G"),
    _t(30, "narration_length", "Generated narration length", "G"),
    _t(31, "speech_metadata_accuracy", "Speech metadata accuracy per field (%)", "G, E.1"),
    _t(32, "dreamsim_per_system", "DreamSim distance per system (valid images)", "G, F.2"),
)

PAPER_FIGURES: tuple[PaperItem, ...] = (
    _f(1, "overview", "Overview of Omni-StoryBench", "1"),
    _f(2, "baseline_systems", "Overview of the baseline system paradigms", "5.1"),
    _f(3, "total_ranking", "Total Average ranking by paradigm", "5.2"),
    _f(4, "missing_outputs", "JSON errors and missing outputs per modality", "5.2"),
    _f(5, "text_metrics", "Comparison of text evaluation metrics", "6.2"),
    _f(6, "image_categories", "Image-judge scores by category and paradigm", "6.3"),
    _f(7, "judge_distributions", "Modality-wise judge score distributions", "A"),
    _f(8, "example_harmonica", "An Omni-StoryBench example", "B"),
    _f(9, "example_baby_fish", "An Omni-StoryBench example", "B"),
    _f(10, "filtering_interface", "Annotation interface for filtering", "D"),
    _f(11, "audit_interface", "Annotation interface for auditing", "D"),
    _f(12, "integrated_category_diagnostics", "Integrated-judge category diagnostics", "F.3"),
    _f(13, "valid_vs_zero", "Total Average, valid-only vs zero-filled", "F.4"),
    _f(14, "zero_filled_ranking", "Total Average ranking under zero-filled scoring", "F.4"),
)

#: Figures that are not computed from scores, and why.
FIGURE_REASONS: dict[int, str] = {
    1: "illustration, not computed from scores",
    2: "illustration, not computed from scores",
    8: "dataset example, not computed from scores",
    9: "dataset example, not computed from scores",
    10: "annotation interface screenshot, not computed from scores",
    11: "annotation interface screenshot, not computed from scores",
}
#: Existing report figures that are paper figures (paper number -> file stem in figures/).
FIGURE_STEMS: dict[int, str] = {
    3: "fig3_total_ranking",
    4: "fig4_missing_outputs",
    6: "fig6_image_categories",
    13: "fig13_valid_vs_zero",
}

TableOrReason = StatTable | str


def table_item(number: int) -> PaperItem:
    return PAPER_TABLES[number - 1]


def figure_item(number: int) -> PaperItem:
    return PAPER_FIGURES[number - 1]


def _from_stats(stats: Mapping[str, StatTable], key: str, why: str) -> TableOrReason:
    table = stats.get(key)
    if table is None:
        return why
    if table.frame.empty and table.note.startswith("skipped"):
        why = table.note.removeprefix("skipped: ").split("\n\n")[0]
        return why.split(" Oracle systems left out:")[0].strip()
    return table


def _filter(table: TableOrReason, keep, title: str, why: str) -> TableOrReason:
    if isinstance(table, str):
        return table
    rows = table.frame[keep(table.frame)].reset_index(drop=True)
    return StatTable(title, rows, table.note) if not rows.empty else why


def _modality_pair(f: pd.DataFrame) -> pd.Series:
    return f["x"].isin(MODALITIES) & f["y"].isin(MODALITIES)


def _policies(stats: Mapping[str, StatTable], keep, title: str, why: str) -> TableOrReason:
    parts = []
    for policy in ("valid", "zero"):
        t = _from_stats(stats, f"partial_correlations_{policy}", why)
        if isinstance(t, StatTable):
            rows = t.frame[keep(t.frame)]
            parts.append(rows.assign(policy=policy)[["policy", *rows.columns]])
    if not parts:
        return why
    return StatTable(title, pd.concat(parts, ignore_index=True))


def compute_paper_tables(
    frame: pd.DataFrame,
    cube: ScoreCube,
    lb: pd.DataFrame,
    stats: Mapping[str, StatTable],
    paradigms: Mapping[str, str] | None = None,
    lengths: pd.DataFrame | None = None,
    exclude: Collection[str] = (),
    human: HumanStudy | None = None,
) -> tuple[dict[int, TableOrReason], dict[str, StatTable]]:
    """Every paper table (number -> table or reason absent) and extra tables (stem -> table).

    ``stats`` is the output of :func:`compute_statistics` for the same inputs; ``human`` the
    ``kind: human`` rows (kept out of ``frame``) and the study plan, for Tables 18–21.
    """
    excluded = set(exclude) & set(cube.systems)
    comp_cube = select_systems(cube, [s for s in cube.systems if s not in excluded])
    comp_lb = lb[~lb["system"].isin(excluded)].reset_index(drop=True)
    comp_frame = frame[~frame["system"].isin(excluded)] if excluded else frame
    mod_valid = modality_frame(comp_lb, "valid")
    out: dict[int, TableOrReason] = {}
    extra: dict[str, StatTable] = {}
    few = "needs at least two systems with the scores"

    out[1] = _filter(
        _from_stats(stats, "correlations_valid", few),
        _modality_pair,
        "Pearson correlations between modality scores (valid-only, Table 1)",
        few,
    )
    out[2] = _from_stats(stats, "bottleneck_valid", few)
    out[3] = _filter(
        _from_stats(stats, "partial_correlations_valid", few),
        lambda f: (f["group"] == "all") & _modality_pair(f),
        "Partial correlations between modality scores, all systems (valid-only, Table 3)",
        few,
    )
    out[4] = _filter(
        _from_stats(stats, "partial_correlations_valid", few),
        lambda f: (f["group"] == "semi+any-to-any") & _modality_pair(f),
        "Partial correlations, semi-orchestration and any-to-any systems (valid-only, Table 4)",
        NO_PARADIGMS,
    )
    out[5] = "dataset construction (Appendix C), not computed from scores"
    out[6] = "judge configuration (Appendix E.3): see `python -m omnistory_core judges list`"
    out[7] = StatTable(
        "BERTScore vs the text judge across systems (valid-only; BERTScore x10 for the ranges)",
        automatic.bertscore_text_judge_agreement(comp_lb),
    )

    ds = dreamsim.dreamsim_per_system(frame)
    ds_comp = ds[~ds["system"].isin(excluded)]
    image_cats = criterion_scores(comp_frame, comp_cube, "image")
    if ds.empty:
        out[8] = out[32] = "no DreamSim rows"
    else:
        out[8] = StatTable(
            "Pearson correlations of mean DreamSim distance with valid-only system scores "
            "(lower distance = closer to the reference)",
            dreamsim.dreamsim_correlations(ds_comp, comp_lb, image_cats),
        )
        out[32] = StatTable(
            "DreamSim distance per system over valid images (SD: population); not in Total Average",
            ds,
            "One row per system: the paper merges systems that differ only in TTS after checking "
            "identical images, which a scores table cannot check.",
        )
    out[9] = StatTable(
        "Pearson correlations of the integrated judge with the modality scores (valid-only)"
        + ("" if ds.empty else " and mean DreamSim distance"),
        categories.integrated_correlations(
            mod_valid, None if ds.empty else dreamsim.dreamsim_means(ds_comp)
        ),
    )
    out[10] = _filter(
        _from_stats(stats, "partial_correlations_valid", few),
        lambda f: (f["group"] == "all") & (f["x"] == "omni"),
        "Partial correlations of the integrated judge with each modality (valid-only)",
        few,
    )
    omni_cats = criterion_scores(comp_frame, comp_cube, "omni")
    if omni_cats.shape[1]:
        out[11] = StatTable(
            "Integrated-judge category diagnostics (valid-only; loss share from 10 - score)",
            categories.category_diagnostics(omni_cats),
        )
        out[12] = StatTable(
            "Partial correlations of each integrated category with each modality score, "
            "controlling for the other two (valid-only)",
            categories.category_partials(omni_cats, mod_valid),
        )
        extra["integrated_category_paradigm_means"] = StatTable(
            "Mean integrated-judge category scores per paradigm (Figure 12a)",
            categories.paradigm_category_means(omni_cats, paradigms),
        )
    else:
        out[11] = out[12] = "no integrated (omni) judge rows"
    out[13] = _from_stats(stats, "paradigm_means", NO_PARADIGMS)
    avail = lb[
        [
            "system",
            "n_examples",
            "missing_text",
            "missing_image",
            "missing_speech",
            "total",
            "total_zero",
        ]
    ].copy()
    avail["change"] = avail["total_zero"] - avail["total"]
    if paradigms:
        avail.insert(1, "paradigm", avail["system"].map(paradigms).fillna("unknown"))
    out[14] = StatTable(
        "Missing candidates and Total Average under valid-only and zero-filled scoring "
        "(change = zero-filled - valid-only)",
        avail,
    )
    out[15] = _from_stats(stats, "bottleneck_zero", few)
    out[16] = _policies(
        stats,
        _modality_pair,
        "Partial correlations between modality scores under both policies",
        few,
    )
    out[17] = _policies(
        stats,
        lambda f: (f["group"] == "all") & (f["x"] == "omni"),
        "Partial correlations of the integrated judge under both policies",
        few,
    )
    if human is None or human.frame.empty:
        for n in (18, 19, 20, 21):
            out[n] = NO_HUMAN
    else:
        crit_means = {t: criterion_scores(comp_frame, comp_cube, t) for t in JUDGE_TRACKS}
        out.update(
            human_tables(human, comp_cube, comp_lb, crit_means, paradigms, excluded, NO_PARADIGMS)
        )
    out[22] = _from_stats(stats, "panel_agreement", few)
    out[23] = _from_stats(stats, "judge_agreement_items", "no judge track has two judges")
    out[24] = _from_stats(stats, "bootstrap_totals", few)
    out[25] = _from_stats(stats, "bootstrap_pairs", "needs at least two systems with a total")
    out[26] = _from_stats(stats, "bootstrap_correlations", few)
    out[27] = _from_stats(stats, "covariance_shares", "needs at least three complete systems")
    out[28] = _table28(stats, comp_cube, comp_lb, lengths)
    out[29] = StatTable(
        "Valid-only results: the seven components (metrics on 0–1) and Total Average",
        lb[["system", "n_examples", *COMPONENTS, "total"]].copy(),
    )
    out[30] = _from_stats(stats, "length_per_system", NO_LENGTHS)

    per_system = automatic.speech_field_accuracy(frame, cube)
    if per_system["n_valid"].sum() if len(per_system) else 0:
        comparable = per_system[~per_system["system"].isin(excluded)]
        out[31] = StatTable(
            "Speech metadata accuracy per field and exact match (%), systems weighted equally",
            automatic.speech_accuracy_table(comparable, paradigms),
        )
        extra["speech_field_accuracy"] = StatTable(
            "Speech metadata accuracy per field and exact match per system (fractions, valid "
            "predictions)",
            per_system,
        )
    else:
        out[31] = "no valid speech-metadata predictions"
    if excluded:
        note = f"Oracle systems left out: {', '.join(sorted(excluded))}."
        for n in (7, 8, 9, 11, 12, 31):
            t = out[n]
            if isinstance(t, StatTable):
                out[n] = StatTable(t.title, t.frame, f"{t.note} {note}".strip())
    return out, extra


def _table28(
    stats: Mapping[str, StatTable],
    cube: ScoreCube,
    lb: pd.DataFrame,
    lengths: pd.DataFrame | None,
) -> TableOrReason:
    base = _from_stats(stats, "aggregation_variants", "needs at least three complete systems")
    if isinstance(base, str):
        return base
    if lengths is None or lengths.empty:
        return StatTable(
            base.title + " — length rows absent",
            base.frame,
            f"{base.note} Length rows (M1, M2, clipped M1, quadratic log-length): "
            f"{NO_LENGTHS}.".strip(),
        )
    controls = text_judge_length_controls(cube, lengths)
    rows = length_variant_rows(scaled_components(lb, "valid"), controls)
    return StatTable(
        "Alternative aggregation rules and narration-length controls of the text judge vs "
        "equal weights (Table 28)",
        pd.concat([base.frame, rows], ignore_index=True),
        f"{base.note} {controls.note}.".strip(),
    )
