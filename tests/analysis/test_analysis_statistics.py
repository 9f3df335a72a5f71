"""compute_statistics: every table on a full synthetic sweep, graceful skips on a partial one."""

from __future__ import annotations

import numpy as np
import pandas as pd
from omnistory_report.analysis import (
    StatisticsOptions,
    build_cube,
    compute_statistics,
    leaderboard,
)
from omnistory_report.analysis.frame import column_values
from omnistory_report.analysis.synthetic import synthetic_scores

PARADIGMS = ("orchestration", "semi-orchestration", "any-to-any", "baseline")
OPTIONS = StatisticsOptions(draws=200, weight_draws=300)


def test_full_sweep_has_every_table():
    frame = synthetic_scores(n_systems=8, n_examples=40, judges_per_track=3, seed=5)
    cube = build_cube(frame)
    lb = leaderboard(cube)
    paradigms = {s: PARADIGMS[i % 4] for i, s in enumerate(cube.systems)}
    stats = compute_statistics(frame, cube, lb, paradigms=paradigms, options=OPTIONS)
    expected = {
        "judge_coverage",
        "criterion_scores_text",
        "criterion_scores_image",
        "criterion_scores_speech",
        "criterion_scores_omni",
        "paradigm_means",
        "correlations_valid",
        "correlations_zero",
        "partial_correlations_valid",
        "partial_correlations_zero",
        "bottleneck_valid",
        "bottleneck_zero",
        "bottleneck_systems",
        "bottleneck_cutoffs",
        "bootstrap_totals",
        "bootstrap_pairs",
        "bootstrap_correlations",
        "judge_agreement_system",
        "judge_agreement_items",
        "panel_agreement",
        "judge_calibration",
        "covariance_shares",
        "aggregation_variants",
        "weights_dirichlet",
        "weights_dirichlet_winners",
        "weights_uniform",
        "weights_uniform_winners",
    }
    assert expected <= set(stats)
    assert all(not t.frame.empty for t in stats.values())
    assert len(stats["bootstrap_pairs"].frame) == 8 * 7 // 2
    assert "200 draws" in stats["bootstrap_totals"].title
    restricted = stats["partial_correlations_valid"].frame
    assert (restricted["group"] == "semi+any-to-any").sum() == 3
    means = stats["paradigm_means"].frame.set_index("paradigm")
    orch = [s for s, p in paradigms.items() if p == "orchestration"]
    expected_mean = lb.set_index("system").loc[orch, "total"].mean()
    assert abs(means.loc["orchestration", "total"] - expected_mean) < 1e-12


def test_partial_sweep_skips_instead_of_failing():
    frame = synthetic_scores(n_systems=2, n_examples=10, judges_per_track=1, seed=5)
    # sys01 has no omni judge yet -> no Total Average; only sys00 is complete.
    keep = ~(
        (column_values(frame["system"]) == "sys01") & (column_values(frame["track"]) == "omni")
    )
    frame = frame[keep]
    cube = build_cube(frame)
    lb = leaderboard(cube)
    assert np.isnan(lb.set_index("system").loc["sys01", "total"])
    stats = compute_statistics(frame, cube, lb, options=OPTIONS)
    assert stats["bottleneck_valid"].note.startswith("skipped")
    assert stats["aggregation_variants"].note.startswith("skipped")
    assert list(stats["bootstrap_totals"].frame["system"]) == ["sys00"]
    assert "bootstrap_pairs" not in stats


def test_excluded_systems_stay_only_in_descriptive_tables():
    frame = synthetic_scores(n_systems=5, n_examples=20, judges_per_track=1, seed=6)
    cube = build_cube(frame)
    lb = leaderboard(cube)
    lengths = pd.DataFrame(
        {"system": list(cube.systems), "example_id": [cube.examples[0]] * 5, "length": 10}
    )
    stats = compute_statistics(frame, cube, lb, lengths=lengths, options=OPTIONS, exclude=["sys02"])
    assert "sys02" in set(stats["judge_coverage"].frame["system"])
    assert "sys02" in set(stats["criterion_scores_text"].frame["system"])
    assert "sys02" in set(stats["length_per_system"].frame["system"])
    assert "sys02" not in set(stats["bootstrap_totals"].frame["system"])
    assert len(stats["bootstrap_totals"].frame) == 4
    assert stats["bottleneck_valid"].note.endswith("Oracle systems left out: sys02.")
    assert "sys02" not in set(stats["weights_dirichlet_winners"].frame["system"])
    assert stats["judge_coverage"].note == ""


def test_supplementary_metrics_table():
    from analysis_helpers import bert, cube_of

    from omnistory_core.scores import ScoreRow

    rows = [
        bert("a", "e1", 0.8),
        bert("a", "e2", 0.9),
        [
            ScoreRow("a", "e1", "metric", "image", "dreamsim", "distance", 0.2, "ok"),
            ScoreRow("a", "e2", "metric", "image", "dreamsim", "distance", 0.4, "ok"),
            ScoreRow("a", "e3", "metric", "image", "dreamsim", "distance", None, "missing_output"),
        ],
    ]
    frame, cube = cube_of(rows)
    stats = compute_statistics(frame, cube, leaderboard(cube), options=OPTIONS)
    table = stats["supplementary_metrics"].frame.iloc[0]
    assert (table["evaluator"], table["n_rows"], table["n_valid"]) == ("dreamsim", 3, 2)
    assert abs(table["valid_mean"] - 0.3) < 1e-12
