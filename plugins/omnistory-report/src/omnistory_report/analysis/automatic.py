"""Automatic-metric tables: BERTScore vs the text judge (F.1, Table 7) and speech metadata accuracy
per field (E.1, Table 31).

* Table 7 compares the valid-only system scores of BERTScore (scaled to 0–10 for the ranges only;
  correlations are scale-free) and the text judge: Pearson r and Spearman rho with two-sided p over
  the systems with both scores, and each score's range.
* Table 31: a speech-metadata prediction is valid when all four fields have an ``ok`` row (the same
  validity as the ``speech_meta`` component, E.2); each field's accuracy and the exact-match rate
  (all four fields correct) are first averaged over a system's valid predictions, then systems are
  weighted equally within each row (all systems, then each paradigm); values in percent.
  ``error`` rows (the classifier could not run) leave that example out; a valid prediction with
  zero matches counts as 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from omnistory_report.analysis.cube import METRICS, ScoreCube
from omnistory_report.analysis.frame import category_codes, column_values

SPEECH_FIELDS: tuple[str, ...] = METRICS["speech_meta"][1]
_MATCH = 1.0 - 1e-9


def bertscore_text_judge_agreement(lb: pd.DataFrame) -> pd.DataFrame:
    """Table 7 (one row): n, Pearson r / p, Spearman rho / p, and the two score ranges."""
    data = lb[["bertscore", "judge_text"]].astype(float).dropna()
    bert, judge = 10 * data["bertscore"].to_numpy(), data["judge_text"].to_numpy()
    n = len(data)
    usable = n >= 3 and np.ptp(bert) > 0 and np.ptp(judge) > 0
    pr = sr = None
    if usable:  # scipy.stats (about 0.4 s) only with something to correlate
        from scipy.stats import pearsonr, spearmanr

        pr, sr = pearsonr(bert, judge), spearmanr(bert, judge)
    row = {
        "n_systems": n,
        "pearson_r": float(pr.statistic) if pr is not None else np.nan,
        "pearson_p": float(pr.pvalue) if pr is not None else np.nan,
        "spearman_rho": float(sr.statistic) if sr is not None else np.nan,
        "spearman_p": float(sr.pvalue) if sr is not None else np.nan,
        "bertscore_x10_min": float(bert.min()) if n else np.nan,
        "bertscore_x10_max": float(bert.max()) if n else np.nan,
        "judge_text_min": float(judge.min()) if n else np.nan,
        "judge_text_max": float(judge.max()) if n else np.nan,
    }
    return pd.DataFrame([row])


def speech_field_accuracy(frame: pd.DataFrame, cube: ScoreCube) -> pd.DataFrame:
    """Per system: valid predictions, accuracy of each field, exact match and the mean of the
    four fields (= the ``speech_meta`` component), as fractions; NaN without a valid prediction."""
    columns = ["system", "n_valid", *SPEECH_FIELDS, "exact_match", "mean"]
    k = cube.metric_index("speech_meta")
    if k is None:
        return pd.DataFrame(columns=columns)
    rows = frame[(frame["kind"] == "metric") & (frame["evaluator"] == "speech_meta")]
    s_code = category_codes(rows["system"], cube.systems)
    e_code = category_codes(rows["example_id"], cube.examples)
    f_code = category_codes(rows["criterion"], SPEECH_FIELDS)
    ok = (column_values(rows["status"]) == "ok") & (s_code >= 0) & (e_code >= 0) & (f_code >= 0)
    valid = cube.valid[k]  # (S, E): all four fields ok
    keep = ok.copy()
    keep[ok] = valid[s_code[ok], e_code[ok]]
    n_sys, n_ex, n_f = len(cube.systems), len(cube.examples), len(SPEECH_FIELDS)
    scores = np.zeros((n_sys, n_ex, n_f))
    scores[s_code[keep], e_code[keep], f_code[keep]] = rows["score"].to_numpy(float)[keep]
    n_valid = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_field = np.where(n_valid[:, None] > 0, scores.sum(axis=1) / n_valid[:, None], np.nan)
        exact = (valid & (scores >= _MATCH).all(axis=2)).sum(axis=1)
        exact_rate = np.where(n_valid > 0, exact / np.maximum(n_valid, 1), np.nan)
    table = pd.DataFrame(per_field, columns=list(SPEECH_FIELDS))
    table.insert(0, "n_valid", n_valid)
    table.insert(0, "system", list(cube.systems))
    table["exact_match"] = exact_rate
    table["mean"] = per_field.mean(axis=1)
    return table[columns]


def speech_accuracy_table(
    per_system: pd.DataFrame, paradigms: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Table 31: equal-weight means over systems (with a valid prediction), in percent: all
    systems first, then one row per paradigm when paradigms are known."""
    values = [*SPEECH_FIELDS, "exact_match", "mean"]
    data = per_system[per_system["n_valid"] > 0]
    groups: list[tuple[str, pd.DataFrame]] = [("all systems", data)]
    if paradigms:
        labels = data["system"].map(lambda s: paradigms.get(str(s), "unknown"))
        groups += [(str(p), data[labels == p]) for p in sorted(set(labels))]
    rows = []
    for name, sub in groups:
        row: dict[str, object] = {"group": name, "n_systems": len(sub)}
        for v in values:
            row[f"{v}_pct"] = 100 * float(sub[v].mean()) if len(sub) else np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=["group", "n_systems", *(f"{v}_pct" for v in values)])
