"""Agreement across LLM judges (Appendix F.6, Tables 22 and 23).

* System level: each judge's valid-only system means, compared between the judges of a track with
  Spearman's rho and Kendall's tau-b; also recomputed on the examples valid for both judges.
* Panels: the fixed membership of F.6 (panel A: Qwen3-30B-A3B, Qwen3-VL-32B, Audio Flamingo Next,
  Qwen3-Omni-30B-A3B; B: Seed-OSS-36B, InternVL3.5-38B, MOSS-Audio-8B, Nemotron-3-Nano-Omni;
  C: Llama-3.3-Nemotron-Super-49B, EXAONE-4.5-33B, Kimi-Audio-7B, Gemma-4-12B), whatever order the
  judges appear in the scores table, or an explicit mapping for other judges.  The four-track
  composite is the mean of a panel's four judge means; the panel Total Average uses the shared
  automatic metrics and that panel's judges.
* Item level: per-example judge scores (mean of the four criteria) on jointly valid
  (system, example) items: Spearman, Pearson, mean absolute difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

import numpy as np
import pandas as pd

from omnistory_report.analysis.cube import JUDGE_TRACKS, METRICS, ScoreCube


def _rank_corr(x: np.ndarray, y: np.ndarray) -> tuple[float, float, int]:
    ok = np.isfinite(x) & np.isfinite(y)
    n = int(ok.sum())
    if n < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return float("nan"), float("nan"), n
    # imported only with something to correlate: scipy.stats takes about 0.4 s, and most
    # reports (a run without judges, a demo) have nothing
    from scipy.stats import kendalltau, spearmanr

    rho = float(spearmanr(x[ok], y[ok]).statistic)
    tau = float(kendalltau(x[ok], y[ok], variant="b").statistic)
    return rho, tau, n


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr  # only with something to correlate (see _rank_corr)

    return float(spearmanr(x, y).statistic)


def judge_system_means(cube: ScoreCube) -> pd.DataFrame:
    """Valid-only system mean of every judge cell (systems x 'track:judge')."""
    sums = (cube.values * cube.valid).sum(axis=2)
    n_valid = cube.valid.sum(axis=2)
    cols = {}
    for k, cell in enumerate(cube.cells):
        if cell.kind == "judge":
            with np.errstate(invalid="ignore", divide="ignore"):
                cols[cell.name] = np.where(n_valid[k] > 0, sums[k] / n_valid[k], np.nan)
    return pd.DataFrame(cols, index=pd.Index(cube.systems, name="system"))


def judge_system_agreement(cube: ScoreCube) -> pd.DataFrame:
    """Pairwise system-level agreement between the judges of each track."""
    rows = []
    for track in JUDGE_TRACKS:
        for ka, kb in combinations(cube.judge_indices(track), 2):
            va, vb = cube.valid[ka], cube.valid[kb]
            with np.errstate(invalid="ignore", divide="ignore"):
                ma = (cube.values[ka] * va).sum(1) / va.sum(1)
                mb = (cube.values[kb] * vb).sum(1) / vb.sum(1)
                joint = va & vb
                ja = (cube.values[ka] * joint).sum(1) / joint.sum(1)
                jb = (cube.values[kb] * joint).sum(1) / joint.sum(1)
            rho, tau, n = _rank_corr(ma, mb)
            rho_j, tau_j, _ = _rank_corr(ja, jb)
            rows.append(
                {
                    "track": track,
                    "judge_a": cube.cells[ka].evaluator,
                    "judge_b": cube.cells[kb].evaluator,
                    "n_systems": n,
                    "spearman": rho,
                    "kendall_tau_b": tau,
                    "spearman_jointly_valid": rho_j,
                    "kendall_tau_b_jointly_valid": tau_j,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "track",
            "judge_a",
            "judge_b",
            "n_systems",
            "spearman",
            "kendall_tau_b",
            "spearman_jointly_valid",
            "kendall_tau_b_jointly_valid",
        ],
    )


def judge_item_agreement(cube: ScoreCube) -> pd.DataFrame:
    """Table 23: agreement on (system, example) items valid for both judges."""
    rows = []
    for track in JUDGE_TRACKS:
        for ka, kb in combinations(cube.judge_indices(track), 2):
            joint = cube.valid[ka] & cube.valid[kb]
            a, b = cube.values[ka][joint], cube.values[kb][joint]
            n = len(a)
            usable = n >= 3 and np.ptp(a) > 0 and np.ptp(b) > 0
            rows.append(
                {
                    "track": track,
                    "judge_a": cube.cells[ka].evaluator,
                    "judge_b": cube.cells[kb].evaluator,
                    "n_items": n,
                    "spearman": _spearman(a, b) if usable else np.nan,
                    "pearson": float(np.corrcoef(a, b)[0, 1]) if usable else np.nan,
                    "mae": float(np.abs(a - b).mean()) if n else np.nan,
                    "mean_a": float(a.mean()) if n else np.nan,
                    "mean_b": float(b.mean()) if n else np.nan,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "track",
            "judge_a",
            "judge_b",
            "n_items",
            "spearman",
            "pearson",
            "mae",
            "mean_a",
            "mean_b",
        ],
    )


def paper_panels() -> dict[str, dict[str, str]]:
    """The fixed judge panels of Appendix F.6: panel -> {track: judge id} (Table 6 ids)."""
    from omnistory_eval.judges.specs import JUDGE_SPECS, PANELS

    return {p: {JUDGE_SPECS[j].track: j for j in ids} for p, ids in PANELS.items()}


def default_panels(cube: ScoreCube) -> dict[str, dict[str, str]]:
    """The F.6 panels restricted to the judges the cube has (fixed membership, independent of the
    order in which judges appear in the scores table).

    A panel is kept when at least one of its judges has rows; its tracks without a judge stay out
    of the mapping (their panel score is then undefined).  Returns {} when the table has no judge
    of the paper's panels: pass explicit panels for other judges.
    """
    have = {(c.track, c.evaluator) for c in cube.cells if c.kind == "judge"}
    out: dict[str, dict[str, str]] = {}
    for panel, judges in paper_panels().items():
        present = {t: j for t, j in judges.items() if (t, j) in have}
        if present:
            out[panel] = present
    return out


def panel_scores(
    cube: ScoreCube, panels: Mapping[str, Mapping[str, str]] | None = None
) -> dict[str, pd.DataFrame]:
    """Per panel: the four track scores, the four-track composite and the panel Total Average."""
    panels = default_panels(cube) if panels is None else panels
    means = judge_system_means(cube)
    sums = (cube.values * cube.valid).sum(axis=2)
    n_valid = cube.valid.sum(axis=2)
    metric = {}
    for name in METRICS:
        k = cube.metric_index(name)
        with np.errstate(invalid="ignore", divide="ignore"):
            metric[name] = np.full(len(cube.systems), np.nan) if k is None else sums[k] / n_valid[k]
    out = {}
    for panel, judges in panels.items():
        frame = pd.DataFrame(index=means.index)
        for track in JUDGE_TRACKS:
            col = f"{track}:{judges[track]}" if track in judges else None
            frame[track] = means[col] if col in means else np.nan
        frame["composite"] = frame[list(JUDGE_TRACKS)].mean(axis=1, skipna=False)
        auto = 10 * (metric["bertscore"] + metric["clip"] + metric["speech_meta"])
        frame["total"] = (auto + frame[list(JUDGE_TRACKS)].sum(axis=1, skipna=False)) / 7
        out[panel] = frame
    return out


def panel_agreement(
    cube: ScoreCube, panels: Mapping[str, Mapping[str, str]] | None = None
) -> pd.DataFrame:
    """Table 22: Spearman / Kendall tau-b between panels per track, composite and total."""
    scores = panel_scores(cube, panels)
    rows = []
    for pa, pb in combinations(scores, 2):
        for measure in (*JUDGE_TRACKS, "composite", "total"):
            rho, tau, n = _rank_corr(
                scores[pa][measure].to_numpy(float), scores[pb][measure].to_numpy(float)
            )
            rows.append(
                {
                    "measure": measure,
                    "panel_a": pa,
                    "panel_b": pb,
                    "n_systems": n,
                    "spearman": rho,
                    "kendall_tau_b": tau,
                }
            )
    return pd.DataFrame(
        rows, columns=["measure", "panel_a", "panel_b", "n_systems", "spearman", "kendall_tau_b"]
    )


def judge_calibration(cube: ScoreCube) -> pd.DataFrame:
    """Per judge: mean of its system means and their between-system sample SD (F.6)."""
    means = judge_system_means(cube)
    rows = []
    for col in means:
        track, judge = col.split(":", 1)
        vals = means[col].dropna()
        rows.append(
            {
                "track": track,
                "judge": judge,
                "n_systems": len(vals),
                "mean": float(vals.mean()) if len(vals) else np.nan,
                "sd_between_systems": float(vals.std(ddof=1)) if len(vals) > 1 else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=["track", "judge", "n_systems", "mean", "sd_between_systems"])
