"""Narration length (trimmed Unicode characters) against BERTScore and the text judge."""

from __future__ import annotations

import pandas as pd
import pytest
from analysis_helpers import bert, cube_of, judge
from omnistory_report.analysis.length import (
    length_correlations,
    length_per_system,
    narration_length,
)


def test_length_counts_unicode_characters_after_trimming():
    assert narration_length("  héllo wörld\n") == 11
    assert narration_length("😀 ok") == 4
    assert narration_length("   ") == 0


def test_correlations_on_jointly_valid_observations():
    groups = []
    lengths = []
    for i in range(6):
        e = f"e{i}"
        groups.append(bert("s", e, 0.9 - 0.01 * i))
        groups.append(judge("s", e, "text", "j1", [1.0 + i] * 4))
        # j2 is invalid on e5 -> e5 is not an observation for the text judge
        groups.append(judge("s", e, "text", "j2", [1.0 + i] * 3 + ([1.0 + i] if i < 5 else [None])))
        lengths.append({"system": "s", "example_id": e, "length": 10 * (i + 1)})
    lengths.append({"system": "s", "example_id": "e-unscored", "length": 5})
    _, cube = cube_of(groups)
    table = length_correlations(cube, pd.DataFrame(lengths)).set_index("score")
    assert table.loc["text_judge", "n_observations"] == 5
    assert table.loc["text_judge", "spearman"] == pytest.approx(1.0)
    assert table.loc["bertscore", "n_observations"] == 6
    assert table.loc["bertscore", "pearson"] == pytest.approx(-1.0)


def test_per_system_table_with_reference():
    lengths = pd.DataFrame(
        {
            "system": ["a", "a", "b", "b"],
            "example_id": ["e1", "e2", "e1", "e2"],
            "length": [10, 20, 0, 40],
        }
    )
    table = length_per_system(lengths, reference=[5, 7]).set_index("system")
    assert table.loc["a", "mean_length"] == 15 and table.loc["a", "n_valid"] == 2
    assert table.loc["b", "n_valid"] == 1  # the empty candidate is not valid
    assert table.loc["(ground truth)", "mean_length"] == 6
