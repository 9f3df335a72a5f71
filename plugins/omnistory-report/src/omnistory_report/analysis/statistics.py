"""Every statistics table of Appendix E.6 and F, one small function per table.

Pure: inputs are the scores frame and cube, the leaderboard and optional per-system paradigms and
narration lengths (:class:`StatisticsInputs`); :data:`STATISTICS` maps each table's file stem to
the function that makes it, in the report's order.  A function returns None where its input is
absent (no paradigms, no narrations) and a skipped table with a note where a partial sweep has
too few systems.  :func:`compute_statistics` makes them all in one call.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

import pandas as pd

from omnistory_report.analysis import agreement, bootstrap, bottleneck, correlations, sensitivity
from omnistory_report.analysis.cube import METRICS, ScoreCube, select_systems
from omnistory_report.analysis.leaderboard import (
    criterion_scores,
    judge_coverage,
    modality_frame,
    scaled_components,
)
from omnistory_report.analysis.length import length_correlations, length_per_system

RESTRICTED_PARADIGMS = ("semi-orchestration", "any-to-any")
POLICY_LABELS = {"valid": "valid-only", "zero": "zero-filled"}
MODALITY_COLUMNS = ["text", "image", "speech", "omni"]
WEIGHT_NAMES = {"dirichlet": "Dirichlet(1,...,1)", "uniform": "normalised U(0.5, 2)"}


@dataclass(frozen=True)
class StatTable:
    """A titled table; ``note`` explains a skip or the conventions used."""

    title: str
    frame: pd.DataFrame
    note: str = ""


@dataclass(frozen=True)
class StatisticsOptions:
    draws: int = bootstrap.DEFAULT_DRAWS
    seed: int = bootstrap.DEFAULT_SEED
    weight_draws: int = sensitivity.DEFAULT_WEIGHT_DRAWS
    dirichlet_seed: int = sensitivity.DIRICHLET_SEED
    uniform_seed: int = sensitivity.UNIFORM_SEED
    alpha: float = 0.05
    tercile: float = 1.0 / 3.0
    panels: Mapping[str, Mapping[str, str]] | None = field(default=None)


@dataclass(frozen=True, eq=False)
class StatisticsInputs:
    """What the statistics are computed from, and what several tables share (computed once).

    ``exclude`` (oracle systems) stay in the descriptive tables (judge coverage, criterion
    scores, narration lengths) and are left out of every comparison across systems: the
    ``comparison_*`` views.
    """

    frame: pd.DataFrame
    cube: ScoreCube
    lb: pd.DataFrame
    paradigms: Mapping[str, str] | None = None
    lengths: pd.DataFrame | None = None
    reference_lengths: list[int] | None = None
    options: StatisticsOptions = field(default_factory=StatisticsOptions)
    exclude: Collection[str] = ()

    @cached_property
    def excluded(self) -> list[str]:
        return sorted(set(self.exclude) & set(self.cube.systems))

    @cached_property
    def comparison_cube(self) -> ScoreCube:
        if not self.excluded:
            return self.cube
        return select_systems(self.cube, [s for s in self.cube.systems if s not in self.excluded])

    @cached_property
    def comparison_lb(self) -> pd.DataFrame:
        if not self.excluded:
            return self.lb
        return self.lb[~self.lb["system"].isin(self.excluded)].reset_index(drop=True)

    @cached_property
    def comparison_lengths(self) -> pd.DataFrame | None:
        if not self.excluded or self.lengths is None:
            return self.lengths
        return self.lengths[~self.lengths["system"].isin(self.excluded)]

    @cached_property
    def modality_scores(self) -> dict[str, pd.DataFrame]:
        """Complete systems' modality scores per policy (``valid``, ``zero``)."""
        return {p: modality_frame(self.comparison_lb, p).dropna() for p in POLICY_LABELS}

    @cached_property
    def has_totals(self) -> bool:
        return bool(
            self.comparison_lb["total"].notna().any() and len(self.comparison_cube.examples)
        )

    @cached_property
    def boot(self) -> bootstrap.BootstrapResult:
        opt = self.options
        return bootstrap.paired_bootstrap(self.comparison_cube, opt.draws, opt.seed)

    @cached_property
    def components(self) -> pd.DataFrame:
        """Complete systems' valid-only components on the Total Average scale."""
        return scaled_components(self.comparison_lb, "valid").dropna()

    @cached_property
    def panels(self) -> Mapping[str, Mapping[str, str]]:
        if self.options.panels is not None:
            return self.options.panels
        return agreement.default_panels(self.comparison_cube)

    @cached_property
    def weight_sweeps(self) -> dict[str, sensitivity.WeightSweep]:
        opt = self.options
        seeds = {"dirichlet": opt.dirichlet_seed, "uniform": opt.uniform_seed}
        return {
            dist: sensitivity.weight_sweep(self.components, dist, opt.weight_draws, seed)
            for dist, seed in seeds.items()
        }


Statistic = Callable[[StatisticsInputs], StatTable | None]


def supplementary_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """Per system, metric and criterion outside the seven components: mean over ok rows."""
    rows = frame[(frame["kind"] == "metric") & ~frame["evaluator"].isin(list(METRICS))]
    if rows.empty:
        return pd.DataFrame()
    rows = rows.astype({c: str for c in ("system", "evaluator", "criterion", "status")})
    ok = rows[rows["status"] == "ok"]
    keys = ["system", "evaluator", "criterion"]
    table = rows.groupby(keys).size().rename("n_rows").to_frame()
    table["n_valid"] = ok.groupby(keys).size()
    table["valid_mean"] = ok.groupby(keys)["score"].mean()
    return table.fillna({"n_valid": 0}).astype({"n_valid": "int64"}).reset_index()


def _skip(title: str, why: str) -> StatTable:
    return StatTable(title, pd.DataFrame(), note=f"skipped: {why}")


# Descriptive tables: one row per system, the oracle systems included.


def judge_coverage_table(s: StatisticsInputs) -> StatTable:
    return StatTable(
        "Judge coverage (a judge run on a system without a valid example is excluded "
        "from the valid-only mean; n_error: examples it could not answer, in no mean)",
        judge_coverage(s.cube),
    )


def criterion_scores_table(track: str) -> Statistic:
    def make(s: StatisticsInputs) -> StatTable | None:
        crit = criterion_scores(s.frame, s.cube, track)
        if not crit.shape[1]:
            return None
        return StatTable(f"Valid-only {track}-judge scores per criterion", crit.reset_index())

    return make


def supplementary_metrics_table(s: StatisticsInputs) -> StatTable | None:
    extra = supplementary_metrics(s.frame)
    if extra.empty:
        return None
    return StatTable(
        "Supplementary metrics outside Total Average (e.g. DreamSim), valid-only means", extra
    )


def length_per_system_table(s: StatisticsInputs) -> StatTable | None:
    if s.lengths is None or s.lengths.empty:
        return None
    return StatTable(
        "Generated narration length (Unicode characters after trimming)",
        length_per_system(s.lengths, s.reference_lengths),
    )


# Comparisons across systems, the oracle systems left out.


def paradigm_means_table(s: StatisticsInputs) -> StatTable | None:
    if not s.paradigms:
        return None
    tab = s.comparison_lb[["system", "total", "total_zero"]].copy()
    tab["paradigm"] = tab["system"].map(s.paradigms).fillna("unknown")
    means = tab.groupby("paradigm")[["total", "total_zero"]].mean()
    means["change"] = means["total_zero"] - means["total"]
    means["n_systems"] = tab.groupby("paradigm").size()
    return StatTable("Mean Total Average by paradigm (Table 13)", means.reset_index())


def correlations_table(policy: str) -> Statistic:
    def make(s: StatisticsInputs) -> StatTable:
        return StatTable(
            f"Pearson correlations between modality scores ({POLICY_LABELS[policy]})",
            correlations.pearson_table(s.modality_scores[policy], MODALITY_COLUMNS),
        )

    return make


def partial_correlations_table(policy: str) -> Statistic:
    def make(s: StatisticsInputs) -> StatTable:
        scores = s.modality_scores[policy]
        parts = [
            correlations.partial_table(scores, correlations.MODALITY_PARTIALS, "all"),
            correlations.partial_table(scores, correlations.OMNI_PARTIALS, "all"),
        ]
        if s.paradigms:
            subset = [x for x in scores.index if s.paradigms.get(x) in RESTRICTED_PARADIGMS]
            parts.append(
                correlations.partial_table(
                    scores.loc[subset], correlations.MODALITY_PARTIALS, "semi+any-to-any"
                )
            )
        return StatTable(
            "Partial correlations, residuals after OLS on the controls with intercept "
            f"({POLICY_LABELS[policy]})",
            pd.concat(parts, ignore_index=True),
        )

    return make


def bottleneck_table(policy: str) -> Statistic:
    def make(s: StatisticsInputs) -> StatTable:
        scores, tercile = s.modality_scores[policy], s.options.tercile
        title = f"Modality-bottleneck diagnostics ({POLICY_LABELS[policy]}, E.6)"
        if len(scores) < 2:
            return _skip(title, "needs at least two complete systems")
        return StatTable(
            title,
            bottleneck.bottleneck_diagnostics(scores, tercile).reset_index(),
            note=f"N = {len(scores)} configurations; bottom cutoff alpha = {tercile:.6g}",
        )

    return make


def bottleneck_systems_table(s: StatisticsInputs) -> StatTable | None:
    scores = s.modality_scores["valid"]
    if len(scores) < 2:
        return None
    return StatTable(
        "Within-modality rank positions and weakest-modality gaps (valid-only)",
        bottleneck.system_bottlenecks(scores).reset_index(),
    )


def bottleneck_cutoffs_table(s: StatisticsInputs) -> StatTable | None:
    scores = s.modality_scores["valid"]
    if len(scores) < 2:
        return None
    return StatTable(
        "Max Total among configurations with p <= alpha (valid-only)",
        bottleneck.bottom_cutoff_sensitivity(scores),
    )


def bootstrap_totals_table(s: StatisticsInputs) -> StatTable:
    opt = s.options
    title = f"Paired bootstrap of Total Average ({opt.draws} draws, seed {opt.seed})"
    if not s.has_totals:
        return _skip(title, "no system has a complete Total Average")
    return StatTable(title, bootstrap.total_intervals(s.boot))


def bootstrap_pairs_table(s: StatisticsInputs) -> StatTable | None:
    if not s.has_totals or len(s.boot.systems) < 2:
        return None
    return StatTable(
        f"Paired differences of Total Average, Holm over all pairs at alpha={s.options.alpha}",
        bootstrap.pairwise_differences(s.boot, s.options.alpha),
    )


def bootstrap_correlations_table(s: StatisticsInputs) -> StatTable | None:
    if not s.has_totals:
        return None
    corr = [bootstrap.correlation_intervals(s.boot)]
    if s.paradigms:
        subset = tuple(x for x in s.boot.systems if s.paradigms.get(x) in RESTRICTED_PARADIGMS)
        corr.append(bootstrap.correlation_intervals(s.boot, subset, "semi+any-to-any"))
    return StatTable("Transition-bootstrap intervals of modality correlations", pd.concat(corr))


def judge_agreement_system_table(s: StatisticsInputs) -> StatTable:
    return StatTable(
        "System-level agreement between judges of a track (Spearman / Kendall tau-b)",
        agreement.judge_system_agreement(s.comparison_cube),
    )


def judge_agreement_items_table(s: StatisticsInputs) -> StatTable:
    return StatTable(
        "Item-level agreement on jointly valid (system, example) items",
        agreement.judge_item_agreement(s.comparison_cube),
    )


def panel_agreement_table(s: StatisticsInputs) -> StatTable:
    panels = s.panels
    if len(panels) < 2:
        return _skip(
            "Agreement between judge panels (Table 22)",
            "needs judges of at least two of the F.6 panels A, B, C "
            f"(found {', '.join(panels) or 'none'}); other judges need explicit panels",
        )
    return StatTable(
        "Agreement between judge panels "
        + "; ".join(f"{p}: {', '.join(j.values())}" for p, j in panels.items()),
        agreement.panel_agreement(s.comparison_cube, panels),
    )


def judge_calibration_table(s: StatisticsInputs) -> StatTable:
    return StatTable(
        "Judge means and between-system SD", agreement.judge_calibration(s.comparison_cube)
    )


def covariance_shares_table(s: StatisticsInputs) -> StatTable | None:
    if len(s.components) < 3:
        return None
    return StatTable(
        "Component ranges, SDs and covariance shares of Total Average (Table 27)",
        sensitivity.covariance_shares(s.components),
    )


def aggregation_variants_table(s: StatisticsInputs) -> StatTable:
    if len(s.components) < 3:
        return _skip("Alternative aggregation rules", "needs at least three complete systems")
    return StatTable(
        "Alternative aggregation rules vs equal weights (Table 28)",
        sensitivity.aggregation_variants(s.components),
    )


def weights_table(dist: str) -> Statistic:
    def make(s: StatisticsInputs) -> StatTable | None:
        if len(s.components) < 3:
            return None
        seed = s.options.dirichlet_seed if dist == "dirichlet" else s.options.uniform_seed
        return StatTable(
            f"Random {WEIGHT_NAMES[dist]} weights ({s.options.weight_draws} draws, seed {seed})",
            s.weight_sweeps[dist].summary,
        )

    return make


def weight_winners_table(dist: str) -> Statistic:
    def make(s: StatisticsInputs) -> StatTable | None:
        if len(s.components) < 3:
            return None
        return StatTable(
            f"Share of {WEIGHT_NAMES[dist]} weight draws in which each system ranks first",
            s.weight_sweeps[dist].winners,
        )

    return make


def length_correlations_table(s: StatisticsInputs) -> StatTable | None:
    lengths = s.comparison_lengths
    if lengths is None or lengths.empty:
        return None
    return StatTable(
        "Narration length vs text judge and BERTScore (pooled observations)",
        length_correlations(s.comparison_cube, lengths),
    )


#: every statistics table by file stem, in the report's order
STATISTICS: dict[str, Statistic] = {
    "judge_coverage": judge_coverage_table,
    **{f"criterion_scores_{t}": criterion_scores_table(t) for t in MODALITY_COLUMNS},
    "supplementary_metrics": supplementary_metrics_table,
    "length_per_system": length_per_system_table,
    "paradigm_means": paradigm_means_table,
    "correlations_valid": correlations_table("valid"),
    "partial_correlations_valid": partial_correlations_table("valid"),
    "bottleneck_valid": bottleneck_table("valid"),
    "bottleneck_systems": bottleneck_systems_table,
    "bottleneck_cutoffs": bottleneck_cutoffs_table,
    "correlations_zero": correlations_table("zero"),
    "partial_correlations_zero": partial_correlations_table("zero"),
    "bottleneck_zero": bottleneck_table("zero"),
    "bootstrap_totals": bootstrap_totals_table,
    "bootstrap_pairs": bootstrap_pairs_table,
    "bootstrap_correlations": bootstrap_correlations_table,
    "judge_agreement_system": judge_agreement_system_table,
    "judge_agreement_items": judge_agreement_items_table,
    "panel_agreement": panel_agreement_table,
    "judge_calibration": judge_calibration_table,
    "covariance_shares": covariance_shares_table,
    "aggregation_variants": aggregation_variants_table,
    **{
        stem: make
        for dist in WEIGHT_NAMES
        for stem, make in (
            (f"weights_{dist}", weights_table(dist)),
            (f"weights_{dist}_winners", weight_winners_table(dist)),
        )
    },
    "length_correlations": length_correlations_table,
}

#: the per-system tables that keep the oracle systems (no "left out" note)
DESCRIPTIVE: frozenset[str] = frozenset(
    {
        "judge_coverage",
        *(f"criterion_scores_{t}" for t in MODALITY_COLUMNS),
        "supplementary_metrics",
        "length_per_system",
    }
)


def statistic(stem: str, inputs: StatisticsInputs) -> StatTable | None:
    """One statistics table (None: its input is absent), noting the oracle systems left out."""
    table = STATISTICS[stem](inputs)
    if table is None or not inputs.excluded or stem in DESCRIPTIVE:
        return table
    note = f"Oracle systems left out: {', '.join(inputs.excluded)}."
    return replace(table, note=f"{table.note} {note}".strip())


def compute_statistics(
    frame: pd.DataFrame,
    cube: ScoreCube,
    lb: pd.DataFrame,
    paradigms: Mapping[str, str] | None = None,
    lengths: pd.DataFrame | None = None,
    reference_lengths: list[int] | None = None,
    options: StatisticsOptions | None = None,
    exclude: Collection[str] = (),
) -> dict[str, StatTable]:
    """All statistics tables, keyed by file stem (see :class:`StatisticsInputs`)."""
    inputs = StatisticsInputs(
        frame,
        cube,
        lb,
        paradigms,
        lengths,
        reference_lengths,
        options or StatisticsOptions(),
        exclude,
    )
    tables = {stem: statistic(stem, inputs) for stem in STATISTICS}
    return {stem: t for stem, t in tables.items() if t is not None}
