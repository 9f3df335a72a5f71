"""Generation failures per system and modality (Figure 4, Table 14's missing counts).

Missing-output counts come from the scores table (the leaderboard's ``missing_*`` columns); the
category breakdown comes from the run's per-example records, handed in as a long frame with columns
``system, example_id, modality, category`` (one row per failed output).
"""

from __future__ import annotations

import pandas as pd

# The orchestration "JSON errors" of Figure 4 / F.4: unparseable JSON, missing required fields,
# invalid labels and unusable image prompts.
PLAN_ERROR_CATEGORIES: tuple[str, ...] = (
    "plan_json_error",
    "plan_missing_field",
    "plan_invalid_label",
    "unusable_image_prompt",
)
FAILURE_COLUMNS = ("system", "example_id", "modality", "category")


def failure_table(failures: pd.DataFrame) -> pd.DataFrame:
    """Counts of failed outputs per (system, modality, category), long format."""
    if failures.empty:
        return pd.DataFrame(columns=["system", "modality", "category", "count"])
    counts = failures.groupby(["system", "modality", "category"]).size().rename("count")
    return (
        counts.reset_index().sort_values(["system", "modality", "category"]).reset_index(drop=True)
    )


def plan_error_counts(failures: pd.DataFrame) -> pd.Series:
    """Examples per system with at least one plan (JSON) error, indexed by system."""
    if failures.empty:
        return pd.Series(dtype="int64", name="plan_errors")
    planned = failures[failures["category"].isin(PLAN_ERROR_CATEGORIES)]
    counts = planned.groupby("system")["example_id"].nunique()
    return counts.rename("plan_errors").astype("int64")
