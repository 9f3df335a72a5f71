"""The registry of the paper's tables and figures, and which table each number gets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from omnistory_report.analysis import StatisticsOptions, build_cube, compute_statistics, leaderboard
from omnistory_report.analysis.frame import _normalise
from omnistory_report.analysis.paper_tables import (
    FIGURE_ITEMS,
    NO_HUMAN,
    NO_LENGTHS,
    NO_PARADIGMS,
    TABLE_ITEMS,
    compute_paper_tables,
)
from omnistory_report.analysis.synthetic import synthetic_scores

OPTIONS = StatisticsOptions(draws=50, weight_draws=50)
STRING_COLUMNS = ["system", "example_id", "kind", "track", "evaluator", "criterion", "status"]


def test_registry_numbers_every_table_and_figure_once():
    assert [t.number for t in TABLE_ITEMS] == list(range(1, 33))
    assert [f.number for f in FIGURE_ITEMS] == list(range(1, 15))
    assert TABLE_ITEMS[7].stem == "table08_dreamsim_correlations"
    assert TABLE_ITEMS[7].label == "Table 8"
    assert FIGURE_ITEMS[11].stem == "figure12_integrated_category_diagnostics"
    stems = [i.stem for i in (*TABLE_ITEMS, *FIGURE_ITEMS)]
    assert len(set(stems)) == len(stems)


def _frame(dreamsim: bool, errors: bool = False):
    frame = synthetic_scores(n_systems=6, n_examples=24, judges_per_track=3, seed=11)
    frame = frame.astype({c: str for c in STRING_COLUMNS})
    if errors:  # one judge could not answer on two examples of sys01
        hit = (
            (frame["system"] == "sys01")
            & (frame["evaluator"] == "text-seed-oss-36b")
            & frame["example_id"].isin(["ex0000", "ex0001"])
        )
        frame.loc[hit, "status"] = "error"
        frame.loc[hit, "score"] = np.nan
    if dreamsim:
        rng = np.random.default_rng(3)
        rows = []
        for s in sorted(frame["system"].unique()):
            for e in sorted(frame["example_id"].unique()):
                rows.append(
                    {
                        "system": s,
                        "example_id": e,
                        "kind": "metric",
                        "track": "image",
                        "evaluator": "dreamsim",
                        "criterion": "distance",
                        "score": float(rng.uniform(0.1, 0.7)),
                        "status": "ok",
                    }
                )
        frame = pd.concat([frame, pd.DataFrame(rows)], ignore_index=True)
    return _normalise(frame)


def _compute(frame, paradigms=None, lengths=None, exclude=()):
    cube = build_cube(frame)
    lb = leaderboard(cube)
    stats = compute_statistics(
        frame, cube, lb, paradigms=paradigms, lengths=lengths, options=OPTIONS, exclude=exclude
    )
    tables, extra = compute_paper_tables(
        frame, cube, lb, stats, paradigms=paradigms, lengths=lengths, exclude=exclude
    )
    return cube, lb, stats, tables, extra


def test_without_run_directory_the_reasons_name_what_is_missing():
    _, lb, stats, tables, _ = _compute(_frame(dreamsim=False))
    assert set(tables) == set(range(1, 33))
    assert tables[8] == tables[32] == "no DreamSim rows"
    assert tables[4] == tables[13] == NO_PARADIGMS
    assert tables[30] == NO_LENGTHS
    assert all(tables[n] == NO_HUMAN for n in (18, 19, 20, 21))
    assert NO_LENGTHS in tables[28].note  # Table 28 without its length rows
    assert "length_m1" not in set(tables[28].frame["variant"])
    # Table 1 is the modality block of the valid-only correlations
    t1 = tables[1].frame
    assert list(zip(t1["x"], t1["y"], strict=True)) == [
        ("text", "image"),
        ("text", "speech"),
        ("image", "speech"),
    ]
    full = stats["correlations_valid"].frame.set_index(["x", "y"])
    assert list(t1["r"]) == list(full.loc[list(zip(t1["x"], t1["y"], strict=True)), "r"])
    # Table 10: the integrated judge against each modality (valid-only)
    assert set(tables[10].frame["x"]) == {"omni"} and len(tables[10].frame) == 3
    # Table 14: change = zero-filled - valid-only per system
    t14 = tables[14].frame.set_index("system")
    lbi = lb.set_index("system")
    assert np.allclose(t14["change"], lbi["total_zero"] - lbi["total"])
    # Table 29: the leaderboard's valid-only components
    assert list(tables[29].frame["total"]) == list(lb["total"])
    # Table 22: the three F.6 panels of the synthetic judges
    assert set(tables[22].frame["panel_a"]) | set(tables[22].frame["panel_b"]) == {"A", "B", "C"}


def test_with_paradigms_lengths_dreamsim_and_an_oracle():
    frame = _frame(dreamsim=True, errors=True)
    systems = sorted(map(str, frame["system"].unique()))
    paradigms = {
        s: ("orchestration", "semi-orchestration", "any-to-any")[i % 3]
        for i, s in enumerate(systems)
    }
    rng = np.random.default_rng(5)
    examples = sorted(map(str, frame["example_id"].unique()))
    lengths = pd.DataFrame(
        [
            {"system": s, "example_id": e, "length": int(rng.integers(30, 300))}
            for s in systems
            for e in examples
        ]
    )
    cube, lb, stats, tables, extra = _compute(frame, paradigms, lengths, exclude=["sys05"])
    absent = {n for n, t in tables.items() if isinstance(t, str)}
    assert absent == {5, 6, 18, 19, 20, 21}
    # the oracle is left out of comparisons, kept in the per-system tables
    assert "sys05" not in set(tables[24].frame["system"])
    assert "sys05" in set(tables[32].frame["system"])
    assert "Oracle systems left out: sys05." in tables[8].note
    assert tables[8].frame["n"].max() == 5
    assert tables[31].frame.set_index("group").loc["all systems", "n_systems"] == 5
    # Table 9 gains the DreamSim row; Table 32 means are the valid-only means of the rows
    assert list(tables[9].frame["y"]) == ["text", "image", "speech", "dreamsim"]
    ds = frame[frame["evaluator"] == "dreamsim"].astype({"system": str})
    means = ds.groupby("system")["score"].mean()
    t32 = tables[32].frame.set_index("system")
    assert np.allclose(t32["mean_distance"], means.loc[t32.index])
    # Table 28: the 14 aggregation variants, then the four length rows
    variants = list(tables[28].frame["variant"])
    assert variants[-4:] == ["length_m1", "length_m1_clipped", "length_quadratic_log", "length_m2"]
    # 24 examples per system are too few for M2's common support (5 per bin and group)
    assert "M2 is undefined" in tables[28].note
    rows = tables[28].frame.set_index("variant")
    assert np.isnan(rows.loc["length_m2", "spearman"]) and rows.loc["length_m2", "winner"] is None
    assert rows.loc["length_m1", "spearman"] > 0
    # Tables 16 and 17 carry both policies
    assert set(tables[16].frame["policy"]) == {"valid", "zero"}
    assert set(tables[16].frame["group"]) == {"all", "semi+any-to-any"}
    assert set(extra) == {"integrated_category_paradigm_means", "speech_field_accuracy"}
    per = extra["speech_field_accuracy"].frame.set_index("system")
    assert per.loc["sys00", "mean"] == pytest.approx(
        lb.set_index("system").loc["sys00", "speech_meta"]
    )
