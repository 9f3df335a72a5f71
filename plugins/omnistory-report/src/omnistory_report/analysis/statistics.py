"""Every statistics table of Appendix E.6 and F, computed from the cube in one call.

Pure: inputs are the scores frame and cube, the leaderboard and optional per-system paradigms and
narration lengths; the output is an ordered mapping name -> :class:`StatTable`.  Analyses that
need more systems than a partial sweep has are skipped with a note instead of failing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

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
    """All statistics tables, keyed by file stem.

    ``exclude`` (oracle systems) stay in the per-system descriptive tables (judge coverage,
    criterion scores, narration lengths) but are left out of every comparison across systems:
    paradigm means, correlations, diagnostics, bootstrap ranks, judge agreement, sensitivity.
    """
    opt = options or StatisticsOptions()
    out: dict[str, StatTable] = {}
    out["judge_coverage"] = StatTable(
        "Judge coverage (a judge run on a system without a valid example is excluded "
        "from the valid-only mean; n_error: examples it could not answer, in no mean)",
        judge_coverage(cube),
    )
    for track in ("text", "image", "speech", "omni"):
        crit = criterion_scores(frame, cube, track)
        if crit.shape[1]:
            out[f"criterion_scores_{track}"] = StatTable(
                f"Valid-only {track}-judge scores per criterion", crit.reset_index()
            )

    extra = supplementary_metrics(frame)
    if not extra.empty:
        out["supplementary_metrics"] = StatTable(
            "Supplementary metrics outside Total Average (e.g. DreamSim), valid-only means",
            extra,
        )
    if lengths is not None and not lengths.empty:
        out["length_per_system"] = StatTable(
            "Generated narration length (Unicode characters after trimming)",
            length_per_system(lengths, reference_lengths),
        )
    descriptive = set(out)
    excluded = sorted(set(exclude) & set(cube.systems))
    if excluded:
        cube = select_systems(cube, [s for s in cube.systems if s not in excluded])
        lb = lb[~lb["system"].isin(excluded)].reset_index(drop=True)
        if lengths is not None:
            lengths = lengths[~lengths["system"].isin(excluded)]

    if paradigms:
        tab = lb[["system", "total", "total_zero"]].copy()
        tab["paradigm"] = tab["system"].map(paradigms).fillna("unknown")
        means = tab.groupby("paradigm")[["total", "total_zero"]].mean()
        means["change"] = means["total_zero"] - means["total"]
        means["n_systems"] = tab.groupby("paradigm").size()
        out["paradigm_means"] = StatTable(
            "Mean Total Average by paradigm (Table 13)", means.reset_index()
        )

    for policy in ("valid", "zero"):
        scores = modality_frame(lb, policy).dropna()
        label = "valid-only" if policy == "valid" else "zero-filled"
        cols = ["text", "image", "speech", "omni"]
        out[f"correlations_{policy}"] = StatTable(
            f"Pearson correlations between modality scores ({label})",
            correlations.pearson_table(scores, cols),
        )
        parts = [
            correlations.partial_table(scores, correlations.MODALITY_PARTIALS, "all"),
            correlations.partial_table(scores, correlations.OMNI_PARTIALS, "all"),
        ]
        if paradigms:
            subset = [s for s in scores.index if paradigms.get(s) in RESTRICTED_PARADIGMS]
            parts.append(
                correlations.partial_table(
                    scores.loc[subset], correlations.MODALITY_PARTIALS, "semi+any-to-any"
                )
            )
        out[f"partial_correlations_{policy}"] = StatTable(
            f"Partial correlations, residuals after OLS on the controls with intercept ({label})",
            pd.concat(parts, ignore_index=True),
        )
        title = f"Modality-bottleneck diagnostics ({label}, E.6)"
        if len(scores) >= 2:
            out[f"bottleneck_{policy}"] = StatTable(
                title,
                bottleneck.bottleneck_diagnostics(scores, opt.tercile).reset_index(),
                note=f"N = {len(scores)} configurations; bottom cutoff alpha = {opt.tercile:.6g}",
            )
            if policy == "valid":
                out["bottleneck_systems"] = StatTable(
                    "Within-modality rank positions and weakest-modality gaps (valid-only)",
                    bottleneck.system_bottlenecks(scores).reset_index(),
                )
                out["bottleneck_cutoffs"] = StatTable(
                    "Max Total among configurations with p <= alpha (valid-only)",
                    bottleneck.bottom_cutoff_sensitivity(scores),
                )
        else:
            out[f"bottleneck_{policy}"] = _skip(title, "needs at least two complete systems")

    title = f"Paired bootstrap of Total Average ({opt.draws} draws, seed {opt.seed})"
    if lb["total"].notna().any() and len(cube.examples):
        result = bootstrap.paired_bootstrap(cube, opt.draws, opt.seed)
        out["bootstrap_totals"] = StatTable(title, bootstrap.total_intervals(result))
        if len(result.systems) >= 2:
            out["bootstrap_pairs"] = StatTable(
                f"Paired differences of Total Average, Holm over all pairs at alpha={opt.alpha}",
                bootstrap.pairwise_differences(result, opt.alpha),
            )
        corr = [bootstrap.correlation_intervals(result)]
        if paradigms:
            subset = tuple(s for s in result.systems if paradigms.get(s) in RESTRICTED_PARADIGMS)
            corr.append(bootstrap.correlation_intervals(result, subset, "semi+any-to-any"))
        out["bootstrap_correlations"] = StatTable(
            "Transition-bootstrap intervals of modality correlations", pd.concat(corr)
        )
    else:
        out["bootstrap_totals"] = _skip(title, "no system has a complete Total Average")

    out["judge_agreement_system"] = StatTable(
        "System-level agreement between judges of a track (Spearman / Kendall tau-b)",
        agreement.judge_system_agreement(cube),
    )
    out["judge_agreement_items"] = StatTable(
        "Item-level agreement on jointly valid (system, example) items",
        agreement.judge_item_agreement(cube),
    )
    panels = opt.panels if opt.panels is not None else agreement.default_panels(cube)
    if len(panels) >= 2:
        out["panel_agreement"] = StatTable(
            "Agreement between judge panels "
            + "; ".join(f"{p}: {', '.join(j.values())}" for p, j in panels.items()),
            agreement.panel_agreement(cube, panels),
        )
    else:
        out["panel_agreement"] = _skip(
            "Agreement between judge panels (Table 22)",
            "needs judges of at least two of the F.6 panels A, B, C "
            f"(found {', '.join(panels) or 'none'}); other judges need explicit panels",
        )
    out["judge_calibration"] = StatTable(
        "Judge means and between-system SD", agreement.judge_calibration(cube)
    )

    comps = scaled_components(lb, "valid").dropna()
    if len(comps) >= 3:
        out["covariance_shares"] = StatTable(
            "Component ranges, SDs and covariance shares of Total Average (Table 27)",
            sensitivity.covariance_shares(comps),
        )
        out["aggregation_variants"] = StatTable(
            "Alternative aggregation rules vs equal weights (Table 28)",
            sensitivity.aggregation_variants(comps),
        )
        for dist, seed in (("dirichlet", opt.dirichlet_seed), ("uniform", opt.uniform_seed)):
            sweep = sensitivity.weight_sweep(comps, dist, opt.weight_draws, seed)
            name = "Dirichlet(1,...,1)" if dist == "dirichlet" else "normalised U(0.5, 2)"
            out[f"weights_{dist}"] = StatTable(
                f"Random {name} weights ({opt.weight_draws} draws, seed {seed})", sweep.summary
            )
            out[f"weights_{dist}_winners"] = StatTable(
                f"Share of {name} weight draws in which each system ranks first", sweep.winners
            )
    else:
        out["aggregation_variants"] = _skip(
            "Alternative aggregation rules", "needs at least three complete systems"
        )

    if lengths is not None and not lengths.empty:
        out["length_correlations"] = StatTable(
            "Narration length vs text judge and BERTScore (pooled observations)",
            length_correlations(cube, lengths),
        )
    if excluded:
        note = f"Oracle systems left out: {', '.join(excluded)}."
        for key in set(out) - descriptive:
            t = out[key]
            out[key] = replace(t, note=f"{t.note} {note}".strip())
    return out
