"""DreamSim distance as a supplementary image diagnostic (Appendix F.2; Tables 8 and 32).

DreamSim rows (``kind=metric, evaluator=dreamsim, criterion=distance``) never enter the
leaderboard.  A system's mean distance uses its ``ok`` rows only: missing images are excluded, not
scored zero (Table 32), and ``invalid`` / ``error`` rows are counted apart.  Lower is better.
"""

from __future__ import annotations

import pandas as pd

from omnistory_report.analysis.categories import pearson_rows

DREAMSIM = "dreamsim"
CRITERION = "distance"
PER_SYSTEM_COLUMNS = (
    "system",
    "n_valid",
    "n_missing",
    "n_invalid",
    "n_error",
    "mean_distance",
    "sd_population",
)
#: Table 8's system-level scores (leaderboard / modality columns), valid-only
TABLE8_SCORES = ("clip", "judge_image", "image_score", "judge_omni", "total")


def dreamsim_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The DreamSim distance rows of a scores table (an empty frame when there are none)."""
    rows = frame[
        (frame["kind"] == "metric")
        & (frame["evaluator"] == DREAMSIM)
        & (frame["criterion"] == CRITERION)
    ]
    return rows.astype({"system": str, "example_id": str, "status": str})


def dreamsim_per_system(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 32: per system the valid / missing / invalid / error counts, the mean distance over
    valid images and its population SD (ddof 0)."""
    rows = dreamsim_rows(frame)
    if rows.empty:
        return pd.DataFrame(columns=list(PER_SYSTEM_COLUMNS))
    counts = rows.groupby(["system", "status"]).size().unstack(fill_value=0)
    ok = rows[rows["status"] == "ok"].groupby("system")["score"]
    table = pd.DataFrame(index=pd.Index(sorted(rows["system"].unique()), name="system"))
    for col, status in (
        ("n_valid", "ok"),
        ("n_missing", "missing_output"),
        ("n_invalid", "invalid"),
        ("n_error", "error"),
    ):
        present = counts[status] if status in counts else pd.Series(dtype="int64")
        table[col] = present.reindex(table.index).fillna(0).astype("int64")
    table["mean_distance"] = ok.mean().reindex(table.index)
    table["sd_population"] = ok.std(ddof=0).reindex(table.index)
    return table.reset_index()[list(PER_SYSTEM_COLUMNS)]


def dreamsim_correlations(
    per_system: pd.DataFrame,
    lb: pd.DataFrame,
    image_categories: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Table 8: Pearson r (two-sided p) of the mean DreamSim distance with CLIP, the image judge,
    the image modality score, the integrated judge, Total Average and each image rubric category
    (valid-only), over the systems with both values."""
    data = lb.set_index("system")[list(TABLE8_SCORES)].astype(float)
    data.insert(0, "dreamsim", per_system.set_index("system")["mean_distance"].reindex(data.index))
    ys = list(TABLE8_SCORES)
    if image_categories is not None and image_categories.shape[1]:
        cats = image_categories.add_prefix("image:")
        data = data.join(cats, how="left")
        ys += list(cats.columns)
    table = pearson_rows(data, "dreamsim", ys)
    return table.rename(columns={"y": "score"}).drop(columns="x")


def dreamsim_means(per_system: pd.DataFrame) -> pd.Series:
    """System -> mean DreamSim distance (NaN without a valid image)."""
    if per_system.empty:
        return pd.Series(dtype=float)
    return per_system.set_index("system")["mean_distance"].astype(float).rename(DREAMSIM)
