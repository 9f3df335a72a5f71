"""report writes the paper's numbered tables and figures and an index of every one of them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from omnistory_report.analysis.paper_tables import FIGURE_ITEMS, TABLE_ITEMS
from omnistory_report.command import build_report
from report_helpers import add_dreamsim


def test_paper_tables_figures_and_index(synthetic_run, tmp_path):
    examples = add_dreamsim(synthetic_run.scores)
    out = build_report(
        synthetic_run.scores,
        tmp_path / "report",
        run_dir=synthetic_run.run_dir,
        examples=synthetic_run.examples,
        bootstrap=50,
        weight_draws=50,
        html=False,
        print_table=False,
    )
    index = json.loads((out / "paper_tables.json").read_text())
    labels = [i.label for i in (*TABLE_ITEMS, *FIGURE_ITEMS)]
    assert list(index) == labels  # every table and figure of the paper, in order
    for label, entry in index.items():
        assert ("file" in entry) != ("absent" in entry), label
        if "file" in entry:
            assert (out / entry["file"]).is_file(), label
    assert index["Table 18"]["absent"] == "no human ratings (see `human import`)"
    assert index["Table 8"]["file"] == "tables/table08_dreamsim_correlations.csv"
    assert index["Figure 12"]["file"] == "figures/figure12_integrated_category_diagnostics.png"
    assert index["Figure 14"]["file"] == "figures/figure14_zero_filled_ranking.png"
    assert index["Figure 5"]["file"] == "figures/figure05_text_metrics.png"
    assert index["Figure 7"]["file"] == "figures/figure07_judge_distributions.png"
    assert index["Figure 1"]["absent"] == "illustration, not computed from scores"
    assert (out / "figures" / "figure12_integrated_category_diagnostics.svg").is_file()
    # the older names stay
    assert (out / "figures" / "fig3_total_ranking.png").is_file()
    assert (out / "figures" / "figure03_total_ranking.png").read_bytes() == (
        out / "figures" / "fig3_total_ranking.png"
    ).read_bytes()
    assert (out / "tables" / "bootstrap_totals.csv").is_file()

    md = (out / "tables" / "index.md").read_text()
    for label in labels:
        assert f"| {label} |" in md
    assert "[table08_dreamsim_correlations.csv](../tables/table08_dreamsim_correlations.csv)" in md

    # Table 32 by hand: sorted systems oracle-c, orch-a, semi-b; orch-a has 0.2 + 0.05 i, i < 4
    t32 = pd.read_csv(out / "tables" / "table32_dreamsim_per_system.csv").set_index("system")
    assert t32.loc["orch-a", "mean_distance"] == pytest.approx(0.2 + 0.05 * 1.5)
    assert t32.loc["orch-a", "sd_population"] == pytest.approx(0.05 * np.std([0, 1, 2, 3]))
    # semi-b: image 2 missing -> mean of 0.3 + 0.05 * (0, 1, 3)
    assert (t32.loc["semi-b", "n_valid"], t32.loc["semi-b", "n_missing"]) == (3, 1)
    assert t32.loc["semi-b", "mean_distance"] == pytest.approx(0.3 + 0.05 * 4 / 3)
    assert "oracle-c" in t32.index  # per-system table keeps the oracle
    t8 = pd.read_csv(out / "tables" / "table08_dreamsim_correlations.csv")
    assert set(t8["n"]) <= {2}  # the oracle is left out of the comparison
    # every table carries the evaluator-error note
    assert (
        "Incomplete: 1 (system, example) pair(s)"
        in (out / "tables" / "table08_dreamsim_correlations.md").read_text()
    )
    assert len(examples) == 4
