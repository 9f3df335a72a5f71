"""Paired bootstrap (Appendix F.7): vectorised replicates match a direct computation,
reproducible for a fixed seed, intervals shrink as examples grow."""

from __future__ import annotations

import numpy as np
import pytest
from omnistory_report.analysis import build_cube, leaderboard, modality_frame
from omnistory_report.analysis.bootstrap import (
    correlation_intervals,
    multiplicities,
    paired_bootstrap,
    pairwise_differences,
    total_intervals,
)
from omnistory_report.analysis.correlations import holm, partial_correlation, pearson
from omnistory_report.analysis.frame import column_values
from omnistory_report.analysis.synthetic import synthetic_scores


def _cube(n_systems=4, n_examples=40, judges=2, seed=0, invalid_rate=0.05):
    frame = synthetic_scores(n_systems, n_examples, judges, seed=seed, invalid_rate=invalid_rate)
    return frame, build_cube(frame)


def _direct_total(frame, weights: dict[str, float], system: str) -> float:
    """Total Average of one replicate, straight from the rows, without the cube."""
    rows = frame[column_values(frame["system"]) == system]
    kind, track = column_values(rows["kind"]), column_values(rows["track"])
    evaluator, example = column_values(rows["evaluator"]), column_values(rows["example_id"])
    status, score = column_values(rows["status"]), rows["score"].to_numpy()

    def per_example(mask, n_required):
        out = {}
        for e in set(example[mask]):
            sel = mask & (example == e)
            if sel.sum() == n_required and (status[sel] == "ok").all():
                out[e] = score[sel].mean()
        return out

    def weighted(values):
        den = sum(weights.get(e, 0) for e in values)
        return sum(weights.get(e, 0) * v for e, v in values.items()) / den if den else np.nan

    comps = []
    for name, n_req in (("bertscore", 1), ("clip", 1), ("speech_meta", 4)):
        comps.append(10 * weighted(per_example((kind == "metric") & (evaluator == name), n_req)))
    for t in ("text", "image", "speech", "omni"):
        means = []
        for judge in sorted(set(evaluator[(kind == "judge") & (track == t)])):
            valid = per_example((kind == "judge") & (evaluator == judge), 4)
            if valid:  # a judge with no valid example is left out of the valid-only mean
                m = weighted(valid)
                if np.isfinite(m):
                    means.append(m)
        comps.append(np.mean(means))
    return float(np.mean(comps))


def test_replicates_match_direct_computation():
    frame, cube = _cube(n_systems=3, n_examples=12, invalid_rate=0.15, seed=4)
    result = paired_bootstrap(cube, draws=3, seed=11)
    blocks = list(multiplicities(len(cube.examples), 3, 11))
    w = np.vstack(blocks)
    for b in range(3):
        weights = dict(zip(cube.examples, w[b], strict=True))
        for j, system in enumerate(result.systems):
            direct = _direct_total(frame, weights, system)
            assert result.replicates["total"][b, j] == pytest.approx(direct, abs=1e-12)


def test_point_estimate_is_the_leaderboard():
    _, cube = _cube()
    lb = leaderboard(cube).set_index("system")
    for policy, col in (("valid", "total"), ("zero", "total_zero")):
        result = paired_bootstrap(cube, draws=50, seed=1, policy=policy)
        expected = lb.loc[list(result.systems), col].to_numpy()
        np.testing.assert_allclose(result.point["total"], expected, atol=1e-12)


def test_reproducible_for_a_fixed_seed():
    _, cube = _cube()
    a = paired_bootstrap(cube, draws=700, seed=20260925)  # crosses a 500-draw block boundary
    b = paired_bootstrap(cube, draws=700, seed=20260925)
    c = paired_bootstrap(cube, draws=700, seed=7)
    for key in a.replicates:
        np.testing.assert_array_equal(a.replicates[key], b.replicates[key])
    assert not np.array_equal(a.replicates["total"], c.replicates["total"])
    # the first 500 draws do not depend on how many are requested
    d = paired_bootstrap(cube, draws=500, seed=20260925)
    np.testing.assert_array_equal(a.replicates["total"][:500], d.replicates["total"])


def test_multiplicities_are_resamples():
    blocks = list(multiplicities(30, 1200, seed=3))
    assert [b.shape for b in blocks] == [(500, 30), (500, 30), (200, 30)]
    assert all((b.sum(axis=1) == 30).all() for b in blocks)


def test_intervals_shrink_as_examples_grow():
    widths = []
    for n in (60, 960):
        _, cube = _cube(n_systems=4, n_examples=n, judges=1, seed=2)
        table = total_intervals(paired_bootstrap(cube, draws=1000, seed=5))
        assert (table["total_lo"] <= table["total"]).all()
        assert (table["total"] <= table["total_hi"]).all()
        widths.append((table["total_hi"] - table["total_lo"]).mean())
    # sqrt(16) = 4x more examples -> about a quarter of the width
    assert widths[1] < 0.5 * widths[0]


def test_total_intervals_and_ranks():
    _, cube = _cube(n_systems=5, n_examples=80)
    result = paired_bootstrap(cube, draws=400, seed=2)
    table = total_intervals(result)
    assert list(table["rank"]) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert (table["rank_lo"] <= table["rank"]).all() and (table["rank"] <= table["rank_hi"]).all()
    assert table["share_rank_1"].sum() <= 1.0 + 1e-12
    ranks = result.rank_replicates()
    assert ranks.shape == (400, 5)
    np.testing.assert_allclose(np.sort(ranks, axis=1), np.tile(np.arange(1, 6), (400, 1)))


def test_pairwise_differences_and_holm():
    _, cube = _cube(n_systems=5, n_examples=80)
    result = paired_bootstrap(cube, draws=400, seed=2)
    pairs = pairwise_differences(result)
    assert len(pairs) == 10
    assert pairs["adjacent"].sum() == 4
    assert (pairs["diff"] >= 0).all()  # a is ranked above b
    assert (pairs["p_holm"] >= pairs["p"] - 1e-15).all()
    assert (pairs["diff_lo"] <= pairs["diff_hi"]).all()
    t = result.replicates["total"]
    a = list(result.systems).index(pairs["system_a"][0])
    b = list(result.systems).index(pairs["system_b"][0])
    assert pairs["se"][0] == pytest.approx(np.std(t[:, a] - t[:, b], ddof=1), rel=1e-12)


def test_holm_hand_computed():
    adjusted = holm(np.array([0.01, 0.04, 0.03, 0.005, np.nan]))
    np.testing.assert_allclose(adjusted[:4], [0.03, 0.06, 0.06, 0.02], atol=1e-15)
    assert np.isnan(adjusted[4])
    assert holm(np.array([0.5, 0.9]))[1] == 1.0


def test_correlation_intervals_point_values():
    _, cube = _cube(n_systems=6, n_examples=60)
    result = paired_bootstrap(cube, draws=300, seed=1)
    table = correlation_intervals(result)
    scores = modality_frame(leaderboard(cube)).loc[list(result.systems)]
    ti = table[(table["x"] == "text") & (table["y"] == "image") & (table["controls"] == "")]
    assert ti["r"].iloc[0] == pytest.approx(pearson(scores["text"], scores["image"]), abs=1e-12)
    part = table[(table["x"] == "omni") & (table["y"] == "speech")].iloc[0]
    expected = partial_correlation(
        scores["omni"].to_numpy(),
        scores["speech"].to_numpy(),
        scores[["text", "image"]].to_numpy(),
    )[0]
    assert part["r"] == pytest.approx(expected, abs=1e-10)
    assert (table["r_lo"] <= table["r_hi"]).all()


def test_systems_without_a_total_are_left_out():
    frame, _ = _cube(n_systems=3, n_examples=20)
    keep = ~(
        (column_values(frame["system"]) == "sys01") & (column_values(frame["track"]) == "omni")
    )
    cube = build_cube(frame[keep])
    result = paired_bootstrap(cube, draws=20, seed=0)
    assert result.systems == ("sys00", "sys02")
