"""The paper's numbered tables and figures: their catalogue, and one function per table.

:data:`TABLE_ITEMS` and :data:`FIGURE_ITEMS` list every table and figure of the paper with its
file stem (``table08_dreamsim_correlations``).  :data:`PAPER_TABLE_MAKERS` maps each table number
to the function that makes it from :class:`PaperInputs`: a :class:`StatTable`, or the reason it
is absent (``"no DreamSim rows"``); :data:`EXTRA_MAKERS` the two tables that go with them.
Tables that need more than a scores table say what is missing (the run directory for narration
lengths and paradigms, human ratings — ``kind: human`` rows from ``human import`` — for Tables
18–21, see :mod:`.human`).  Comparisons across systems leave oracle systems out, as in
:func:`compute_statistics`; :func:`compute_paper_tables` makes them all in one call.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import cached_property

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
FEW = "needs at least two systems with the scores"
FEW_TOTALS = "needs at least two systems with a total"
FEW_COMPLETE = "needs at least three complete systems"


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


TABLE_ITEMS: tuple[PaperItem, ...] = (
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

FIGURE_ITEMS: tuple[PaperItem, ...] = (
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
#: the tables whose comparisons leave the oracle systems out and say so in their note
ORACLE_NOTED: frozenset[int] = frozenset({7, 8, 9, 11, 12, 31})

TableOrReason = StatTable | str


def table_item(number: int) -> PaperItem:
    return TABLE_ITEMS[number - 1]


def figure_item(number: int) -> PaperItem:
    return FIGURE_ITEMS[number - 1]


@dataclass(frozen=True, eq=False)
class PaperInputs:
    """What the paper tables are made from, and what several of them share (computed once).

    ``stats`` holds the :func:`compute_statistics` tables for the same inputs (any mapping with
    ``get``); ``human`` the ``kind: human`` rows (kept out of ``frame``) and the study plan.
    """

    frame: pd.DataFrame
    cube: ScoreCube
    lb: pd.DataFrame
    stats: Mapping[str, StatTable]
    paradigms: Mapping[str, str] | None = None
    lengths: pd.DataFrame | None = None
    exclude: Collection[str] = ()
    human: HumanStudy | None = None

    @cached_property
    def excluded(self) -> set[str]:
        return set(self.exclude) & set(self.cube.systems)

    @cached_property
    def comparison_cube(self) -> ScoreCube:
        return select_systems(self.cube, [s for s in self.cube.systems if s not in self.excluded])

    @cached_property
    def comparison_lb(self) -> pd.DataFrame:
        return self.lb[~self.lb["system"].isin(self.excluded)].reset_index(drop=True)

    @cached_property
    def comparison_frame(self) -> pd.DataFrame:
        if not self.excluded:
            return self.frame
        return self.frame[~self.frame["system"].isin(self.excluded)]

    @cached_property
    def modalities_valid(self) -> pd.DataFrame:
        return modality_frame(self.comparison_lb, "valid")

    @cached_property
    def dreamsim(self) -> pd.DataFrame:
        return dreamsim.dreamsim_per_system(self.frame)

    @cached_property
    def dreamsim_comparable(self) -> pd.DataFrame:
        return self.dreamsim[~self.dreamsim["system"].isin(self.excluded)]

    def criteria(self, track: str) -> pd.DataFrame:
        return criterion_scores(self.comparison_frame, self.comparison_cube, track)

    @cached_property
    def omni_categories(self) -> pd.DataFrame:
        return self.criteria("omni")

    @cached_property
    def speech_accuracy(self) -> pd.DataFrame:
        return automatic.speech_field_accuracy(self.frame, self.cube)

    @cached_property
    def has_speech_accuracy(self) -> bool:
        per_system = self.speech_accuracy
        return bool(per_system["n_valid"].sum() if len(per_system) else 0)

    @cached_property
    def human_study_tables(self) -> dict[int, TableOrReason]:
        """Tables 18–21, made together: they share the study's evaluations."""
        if self.human is None or self.human.frame.empty:
            return dict.fromkeys((18, 19, 20, 21), NO_HUMAN)
        crit_means = {t: self.criteria(t) for t in JUDGE_TRACKS}
        return human_tables(
            self.human,
            self.comparison_cube,
            self.comparison_lb,
            crit_means,
            self.paradigms,
            self.excluded,
            NO_PARADIGMS,
        )


PaperTableMaker = Callable[[PaperInputs], TableOrReason]


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


def _omni_all(f: pd.DataFrame) -> pd.Series:
    return (f["group"] == "all") & (f["x"] == "omni")


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


def _stat(key: str, why: str) -> PaperTableMaker:
    """A paper table that is a statistics table as it is."""
    return lambda p: _from_stats(p.stats, key, why)


def _reason(why: str) -> PaperTableMaker:
    """A paper table no scores table determines."""
    return lambda p: why


def table01(p: PaperInputs) -> TableOrReason:
    return _filter(
        _from_stats(p.stats, "correlations_valid", FEW),
        _modality_pair,
        "Pearson correlations between modality scores (valid-only, Table 1)",
        FEW,
    )


def table03(p: PaperInputs) -> TableOrReason:
    return _filter(
        _from_stats(p.stats, "partial_correlations_valid", FEW),
        lambda f: (f["group"] == "all") & _modality_pair(f),
        "Partial correlations between modality scores, all systems (valid-only, Table 3)",
        FEW,
    )


def table04(p: PaperInputs) -> TableOrReason:
    return _filter(
        _from_stats(p.stats, "partial_correlations_valid", FEW),
        lambda f: (f["group"] == "semi+any-to-any") & _modality_pair(f),
        "Partial correlations, semi-orchestration and any-to-any systems (valid-only, Table 4)",
        NO_PARADIGMS,
    )


def table07(p: PaperInputs) -> TableOrReason:
    return StatTable(
        "BERTScore vs the text judge across systems (valid-only; BERTScore x10 for the ranges)",
        automatic.bertscore_text_judge_agreement(p.comparison_lb),
    )


def table08(p: PaperInputs) -> TableOrReason:
    if p.dreamsim.empty:
        return "no DreamSim rows"
    return StatTable(
        "Pearson correlations of mean DreamSim distance with valid-only system scores "
        "(lower distance = closer to the reference)",
        dreamsim.dreamsim_correlations(p.dreamsim_comparable, p.comparison_lb, p.criteria("image")),
    )


def table09(p: PaperInputs) -> TableOrReason:
    means = None if p.dreamsim.empty else dreamsim.dreamsim_means(p.dreamsim_comparable)
    return StatTable(
        "Pearson correlations of the integrated judge with the modality scores (valid-only)"
        + ("" if p.dreamsim.empty else " and mean DreamSim distance"),
        categories.integrated_correlations(p.modalities_valid, means),
    )


def table10(p: PaperInputs) -> TableOrReason:
    return _filter(
        _from_stats(p.stats, "partial_correlations_valid", FEW),
        _omni_all,
        "Partial correlations of the integrated judge with each modality (valid-only)",
        FEW,
    )


def table11(p: PaperInputs) -> TableOrReason:
    if not p.omni_categories.shape[1]:
        return "no integrated (omni) judge rows"
    return StatTable(
        "Integrated-judge category diagnostics (valid-only; loss share from 10 - score)",
        categories.category_diagnostics(p.omni_categories),
    )


def table12(p: PaperInputs) -> TableOrReason:
    if not p.omni_categories.shape[1]:
        return "no integrated (omni) judge rows"
    return StatTable(
        "Partial correlations of each integrated category with each modality score, "
        "controlling for the other two (valid-only)",
        categories.category_partials(p.omni_categories, p.modalities_valid),
    )


def table14(p: PaperInputs) -> TableOrReason:
    columns = ["system", "n_examples", "missing_text", "missing_image", "missing_speech"]
    avail = p.lb[[*columns, "total", "total_zero"]].copy()
    avail["change"] = avail["total_zero"] - avail["total"]
    if p.paradigms:
        avail.insert(1, "paradigm", avail["system"].map(p.paradigms).fillna("unknown"))
    return StatTable(
        "Missing candidates and Total Average under valid-only and zero-filled scoring "
        "(change = zero-filled - valid-only)",
        avail,
    )


def table16(p: PaperInputs) -> TableOrReason:
    return _policies(
        p.stats,
        _modality_pair,
        "Partial correlations between modality scores under both policies",
        FEW,
    )


def table17(p: PaperInputs) -> TableOrReason:
    return _policies(
        p.stats, _omni_all, "Partial correlations of the integrated judge under both policies", FEW
    )


def human_table(number: int) -> PaperTableMaker:
    return lambda p: p.human_study_tables[number]


def table28(p: PaperInputs) -> TableOrReason:
    base = _from_stats(p.stats, "aggregation_variants", FEW_COMPLETE)
    if isinstance(base, str):
        return base
    if p.lengths is None or p.lengths.empty:
        return StatTable(
            base.title + " — length rows absent",
            base.frame,
            f"{base.note} Length rows (M1, M2, clipped M1, quadratic log-length): "
            f"{NO_LENGTHS}.".strip(),
        )
    controls = text_judge_length_controls(p.comparison_cube, p.lengths)
    rows = length_variant_rows(scaled_components(p.comparison_lb, "valid"), controls)
    return StatTable(
        "Alternative aggregation rules and narration-length controls of the text judge vs "
        "equal weights (Table 28)",
        pd.concat([base.frame, rows], ignore_index=True),
        f"{base.note} {controls.note}.".strip(),
    )


def table29(p: PaperInputs) -> TableOrReason:
    return StatTable(
        "Valid-only results: the seven components (metrics on 0–1) and Total Average",
        p.lb[["system", "n_examples", *COMPONENTS, "total"]].copy(),
    )


def table31(p: PaperInputs) -> TableOrReason:
    if not p.has_speech_accuracy:
        return "no valid speech-metadata predictions"
    per_system = p.speech_accuracy
    comparable = per_system[~per_system["system"].isin(p.excluded)]
    return StatTable(
        "Speech metadata accuracy per field and exact match (%), systems weighted equally",
        automatic.speech_accuracy_table(comparable, p.paradigms),
    )


def table32(p: PaperInputs) -> TableOrReason:
    if p.dreamsim.empty:
        return "no DreamSim rows"
    return StatTable(
        "DreamSim distance per system over valid images (SD: population); not in Total Average",
        p.dreamsim,
        "One row per system: the paper merges systems that differ only in TTS after checking "
        "identical images, which a scores table cannot check.",
    )


#: every paper table by number
PAPER_TABLE_MAKERS: dict[int, PaperTableMaker] = {
    1: table01,
    2: _stat("bottleneck_valid", FEW),
    3: table03,
    4: table04,
    5: _reason("dataset construction (Appendix C), not computed from scores"),
    6: _reason("judge configuration (Appendix E.3): see `python -m omnistory_core judges list`"),
    7: table07,
    8: table08,
    9: table09,
    10: table10,
    11: table11,
    12: table12,
    13: _stat("paradigm_means", NO_PARADIGMS),
    14: table14,
    15: _stat("bottleneck_zero", FEW),
    16: table16,
    17: table17,
    **{n: human_table(n) for n in (18, 19, 20, 21)},
    22: _stat("panel_agreement", FEW),
    23: _stat("judge_agreement_items", "no judge track has two judges"),
    24: _stat("bootstrap_totals", FEW),
    25: _stat("bootstrap_pairs", FEW_TOTALS),
    26: _stat("bootstrap_correlations", FEW),
    27: _stat("covariance_shares", FEW_COMPLETE),
    28: table28,
    29: table29,
    30: _stat("length_per_system", NO_LENGTHS),
    31: table31,
    32: table32,
}


def paper_table(number: int, inputs: PaperInputs) -> TableOrReason:
    """Paper table ``number`` (or why it is absent), noting the oracle systems left out."""
    table = PAPER_TABLE_MAKERS[number](inputs)
    if isinstance(table, str) or not inputs.excluded or number not in ORACLE_NOTED:
        return table
    note = f"Oracle systems left out: {', '.join(sorted(inputs.excluded))}."
    return StatTable(table.title, table.frame, f"{table.note} {note}".strip())


def integrated_category_paradigm_means(p: PaperInputs) -> StatTable | None:
    if not p.omni_categories.shape[1]:
        return None
    return StatTable(
        "Mean integrated-judge category scores per paradigm (Figure 12a)",
        categories.paradigm_category_means(p.omni_categories, p.paradigms),
    )


def speech_field_accuracy(p: PaperInputs) -> StatTable | None:
    if not p.has_speech_accuracy:
        return None
    return StatTable(
        "Speech metadata accuracy per field and exact match per system (fractions, valid "
        "predictions)",
        p.speech_accuracy,
    )


#: the tables written with the paper's (not numbered in it), by file stem
EXTRA_MAKERS: dict[str, Callable[[PaperInputs], StatTable | None]] = {
    "integrated_category_paradigm_means": integrated_category_paradigm_means,
    "speech_field_accuracy": speech_field_accuracy,
}


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
    inputs = PaperInputs(frame, cube, lb, stats, paradigms, lengths, exclude, human)
    tables = {n: paper_table(n, inputs) for n in PAPER_TABLE_MAKERS}
    extra = {stem: make(inputs) for stem, make in EXTRA_MAKERS.items()}
    return tables, {stem: t for stem, t in extra.items() if t is not None}
