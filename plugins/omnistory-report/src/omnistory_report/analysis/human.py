"""Human evaluation vs the LLM judges (Appendix F.5, Tables 18–21).

Inputs are the ``kind: human`` rows of the scores table (written by ``human import``) and, when
present, the study plan stored next to it (``human_plan.json``: the planned items, the window).

* One *evaluation* is one annotator's four rubric scores for one item (system x transition x
  track).  It is *scored* when all four criteria are ``ok``; otherwise it was skipped or unscored.
* Table 18: planned items, submitted / scored / skipped-or-unscored evaluations, rubric scores,
  annotators and the mean number of scored evaluations per system–track cell, per track.
* Table 19: per system, the human mean of a track weights each scored evaluation equally after
  averaging its four rubric scores; the automated comparator is the leaderboard's valid-only
  three-judge track score over the whole benchmark (each judge's valid-example mean, then the
  judges averaged equally).  The four-track composite averages the four track means equally (a
  system lacking a track has none).  Spearman's rho, Kendall's tau-b and Pearson's r over systems
  (two-sided p-values, descriptive), per track, the composite and each track's four criteria; the
  leave-one-transition-out (LOTO) range of rho drops each window transition's human ratings in turn
  with the automated comparator fixed; and rho against judges restricted to the window.
* Table 20: per paradigm, the mean over its systems of the human and the judge scores, and the
  paradigm ranks under each (1 = best).
* Table 21: ordinal Krippendorff alpha between annotators per track and criterion (units: the
  items with at least two scored evaluations) and its range over the four criteria; and the
  system-ranking Spearman correlation between the judges on the window and on every transition.

Oracle systems are left out of the comparisons across systems (Tables 19–20).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from omnistory_report.analysis.cube import JUDGE_TRACKS, ScoreCube
from omnistory_report.analysis.statistics import StatTable

#: file next to the scores table where ``human import`` keeps the study plan
PLAN_SIDECAR = "human_plan.json"
RUBRIC_SIZE = 4
#: track labels in the tables (the paper's "integrated" evaluation is the ``omni`` track)
TRACK_NAMES = {"text": "text", "image": "image", "speech": "speech", "omni": "integrated"}
MEASURES: tuple[str, ...] = (*JUDGE_TRACKS, "composite")
LEVELS = ("nominal", "ordinal", "interval", "ratio")


@dataclass(frozen=True)
class HumanStudy:
    """The human rows (scores-table columns) and the plan, if known (``plan.json`` as a dict)."""

    frame: pd.DataFrame
    plan: Mapping[str, Any] | None = None

    @property
    def window(self) -> tuple[str, ...]:
        if self.plan and self.plan.get("window"):
            return tuple(map(str, self.plan["window"]))
        return tuple(sorted(map(str, self.frame["example_id"].unique())))


def split_human(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the rows without ``human`` ones, the ``human`` rows)."""
    is_human = (frame["kind"] == "human").to_numpy()
    if not is_human.any():
        return frame, frame.iloc[:0]
    return (
        frame[~is_human].reset_index(drop=True),
        frame[is_human].reset_index(drop=True),
    )


def read_plan_sidecar(scores_path: str | Path) -> dict[str, Any] | None:
    """The plan ``human import`` stored next to the scores table, or None."""
    path = Path(scores_path).with_name(PLAN_SIDECAR)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object (a human-study plan)")
    return data


# --------------------------------------------------------------------------------------------
# evaluations and system means


def evaluations(human: pd.DataFrame) -> pd.DataFrame:
    """One row per evaluation: system, example_id, track, evaluator, scored, score (mean of the
    four criteria when scored, else NaN) and the criterion scores in a ``criteria`` dict."""
    cols = ["system", "example_id", "track", "evaluator", "scored", "score", "criteria"]
    if human.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    keys = ["system", "example_id", "track", "evaluator"]
    for key, group in human.groupby(keys, observed=True, sort=True):
        ok = group[group["status"] == "ok"]
        scored = len(ok) == RUBRIC_SIZE and len(group) == RUBRIC_SIZE
        crit = dict(zip(ok["criterion"].astype(str), ok["score"].astype(float), strict=True))
        rows.append(
            {
                **dict(zip(keys, map(str, key), strict=True)),
                "scored": scored,
                "score": float(np.mean(list(crit.values()))) if scored else np.nan,
                "criteria": crit if scored else {},
            }
        )
    return pd.DataFrame(rows, columns=cols)


def human_system_means(evals: pd.DataFrame, criteria: bool = False) -> pd.DataFrame:
    """Systems x (text, image, speech, omni, composite) human means over scored evaluations; with
    ``criteria`` also one ``track:criterion`` column per rubric criterion."""
    scored = evals[evals["scored"]]
    table = scored.pivot_table(index="system", columns="track", values="score", aggfunc="mean")
    out = pd.DataFrame(index=pd.Index(sorted(evals["system"].unique()), name="system"))
    for track in JUDGE_TRACKS:
        out[track] = table[track] if track in table else np.nan
    out["composite"] = out[list(JUDGE_TRACKS)].mean(axis=1, skipna=False)
    if criteria and not scored.empty:
        long = pd.DataFrame(
            [
                {"system": r.system, "column": f"{r.track}:{c}", "score": v}
                for r in scored.itertuples()
                for c, v in r.criteria.items()
            ]
        )
        wide = long.pivot_table(index="system", columns="column", values="score", aggfunc="mean")
        out = out.join(wide)
    return out


def judge_track_means(lb: pd.DataFrame) -> pd.DataFrame:
    """Systems x (text, image, speech, omni, composite): valid-only three-judge track scores."""
    frame = lb.set_index("system")[[f"judge_{t}" for t in JUDGE_TRACKS]].astype(float)
    frame.columns = list(JUDGE_TRACKS)
    frame["composite"] = frame.mean(axis=1, skipna=False)
    return frame


# --------------------------------------------------------------------------------------------
# correlations


def _corr(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from scipy.stats import kendalltau, pearsonr, spearmanr

    ok = np.isfinite(x) & np.isfinite(y)
    n = int(ok.sum())
    keys = ("spearman", "spearman_p", "kendall_tau_b", "kendall_p", "pearson", "pearson_p")
    out: dict[str, float] = {k: np.nan for k in keys}
    out["n_systems"] = n
    if n < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return out
    s = spearmanr(x[ok], y[ok])
    k = kendalltau(x[ok], y[ok], variant="b")
    p = pearsonr(x[ok], y[ok])
    values = (s.statistic, s.pvalue, k.statistic, k.pvalue, p.statistic, p.pvalue)
    out.update({key: float(v) for key, v in zip(keys, values, strict=True)})
    return out


def _aligned(a: pd.DataFrame, b: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray]:
    systems = sorted(set(a.index) & set(b.index))
    x = a[col].reindex(systems).to_numpy(float) if col in a else np.full(len(systems), np.nan)
    y = b[col].reindex(systems).to_numpy(float) if col in b else np.full(len(systems), np.nan)
    return x, y


def agreement_table(
    evals: pd.DataFrame,
    judges: pd.DataFrame,
    window: Sequence[str],
    judges_window: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Table 19: human vs judge system means per track, composite and track criterion."""
    from omnistory_eval.judges.rubric import CRITERIA

    human = human_system_means(evals, criteria=True)
    per_criterion = [f"{t}:{c}" for t in JUDGE_TRACKS for c in CRITERIA[t]]
    measures = [*MEASURES, *(m for m in per_criterion if m in human and m in judges)]
    loto = [
        human_system_means(evals[evals["example_id"] != e], criteria=True)
        for e in window
        if (evals["example_id"] == e).any()
    ]
    rows = []
    for m in measures:
        track, _, crit = m.partition(":")
        row: dict[str, Any] = {
            "measure": TRACK_NAMES.get(track, track) + (f":{crit}" if crit else "")
        }
        row.update(_corr(*_aligned(human, judges, m)))
        rhos, ns = [], []
        for h in loto:
            c = _corr(*_aligned(h, judges, m))
            rhos.append(c["spearman"])
            ns.append(c["n_systems"])
        finite = [r for r in rhos if np.isfinite(r)]
        row["loto_spearman_min"] = min(finite) if finite else np.nan
        row["loto_spearman_max"] = max(finite) if finite else np.nan
        row["loto_n_systems_min"] = min(ns) if ns else np.nan
        row["loto_n_systems_max"] = max(ns) if ns else np.nan
        if judges_window is not None:
            row["spearman_window_judges"] = _corr(*_aligned(human, judges_window, m))["spearman"]
        rows.append(row)
    return pd.DataFrame(rows)


def criterion_judge_means(criteria: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """``track:criterion`` columns from per-track criterion tables (systems x criteria)."""
    parts = [t.add_prefix(f"{track}:") for track, t in criteria.items() if t.shape[1]]
    return pd.concat(parts, axis=1) if parts else pd.DataFrame()


# --------------------------------------------------------------------------------------------
# paradigms


def paradigm_table(
    human: pd.DataFrame, judges: pd.DataFrame, paradigms: Mapping[str, str]
) -> pd.DataFrame:
    """Table 20: per measure and paradigm, mean human and judge scores and the paradigm ranks."""
    rows = []
    for m in MEASURES:
        x, y = _aligned(human, judges, m)
        systems = sorted(set(human.index) & set(judges.index))
        both = pd.DataFrame({"system": systems, "human": x, "judge": y}).dropna()
        both["paradigm"] = both["system"].map(paradigms).fillna("unknown")
        g = both.groupby("paradigm", sort=True).agg(
            n_systems=("system", "size"), human_mean=("human", "mean"), judge_mean=("judge", "mean")
        )
        if g.empty:
            continue
        g["human_rank"] = g["human_mean"].rank(ascending=False, method="min").astype(int)
        g["judge_rank"] = g["judge_mean"].rank(ascending=False, method="min").astype(int)
        for paradigm, r in g.sort_values(["judge_rank", "human_rank"]).iterrows():
            rows.append({"measure": TRACK_NAMES.get(m, m), "paradigm": paradigm, **r.to_dict()})
    cols = ["measure", "paradigm", "n_systems", "human_mean", "judge_mean", "human_rank"]
    return pd.DataFrame(rows, columns=[*cols, "judge_rank"])


def same_ordering(table: pd.DataFrame) -> dict[str, bool]:
    """Per measure: do humans and judges order the paradigms identically?"""
    return {
        str(m): bool((g["human_rank"] == g["judge_rank"]).all())
        for m, g in table.groupby("measure", sort=False)
    }


# --------------------------------------------------------------------------------------------
# Krippendorff's alpha


def krippendorff_alpha(units: Iterable[Sequence[float]], level: str = "ordinal") -> float:
    """Krippendorff's alpha from the values each unit received (any number of coders, missing
    values simply absent).  Units with fewer than two values are not pairable and are ignored.

    ``level``: nominal, ordinal (ranks of the values that occur, Krippendorff 2011), interval or
    ratio.  NaN when fewer than two pairable values or no variation at all.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    pairable = [list(map(float, u)) for u in units if len(u) >= 2]
    values = sorted({v for u in pairable for v in u})
    if len(values) < 2:
        return float("nan")
    pos = {v: i for i, v in enumerate(values)}
    n_vals = len(values)
    coincidence = np.zeros((n_vals, n_vals))
    for u in pairable:
        counts = np.bincount([pos[v] for v in u], minlength=n_vals).astype(float)
        coincidence += (np.outer(counts, counts) - np.diag(counts)) / (len(u) - 1)
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    v = np.array(values)
    if level == "nominal":
        d2 = 1.0 - np.eye(n_vals)
    elif level == "interval":
        d2 = (v[:, None] - v[None, :]) ** 2
    elif level == "ratio":
        with np.errstate(invalid="ignore", divide="ignore"):
            d2 = np.nan_to_num(((v[:, None] - v[None, :]) / (v[:, None] + v[None, :])) ** 2)
    else:
        cum = np.cumsum(n_c)
        lo, hi = (
            np.minimum.outer(np.arange(n_vals), np.arange(n_vals)),
            np.maximum.outer(np.arange(n_vals), np.arange(n_vals)),
        )
        between = cum[hi] - cum[lo] + n_c[lo]  # sum of n_g for g from lo to hi
        d2 = (between - (n_c[lo] + n_c[hi]) / 2) ** 2
    expected = float((np.outer(n_c, n_c) * d2).sum())
    if expected == 0:
        return float("nan")
    return 1.0 - (n - 1) * float((coincidence * d2).sum()) / expected


def alpha_units(evals: pd.DataFrame, track: str, criterion: str) -> list[list[float]]:
    """The scores each item of a track received for one criterion (scored evaluations)."""
    scored = evals[evals["scored"] & (evals["track"] == track)]
    units: dict[tuple[str, str], list[float]] = {}
    for r in scored.itertuples():
        if criterion in r.criteria:
            units.setdefault((r.system, r.example_id), []).append(r.criteria[criterion])
    return list(units.values())


# --------------------------------------------------------------------------------------------
# the four tables


def counts_table(evals: pd.DataFrame, plan: Mapping[str, Any] | None) -> pd.DataFrame:
    """Table 18 (with a total row)."""
    planned: dict[str, int] = {}
    cells: dict[str, int] = {}
    if plan:
        for item in plan.get("items") or ():
            planned[str(item["track"])] = planned.get(str(item["track"]), 0) + 1
        n_plan_systems = len(plan.get("systems") or ())
        cells = {t: n_plan_systems for t in planned}
    rows = []
    for track in JUDGE_TRACKS:
        e = evals[evals["track"] == track]
        if e.empty and track not in planned:
            continue
        n_cells = cells.get(track) or e["system"].nunique()
        scored = int(e["scored"].sum())
        rows.append(
            {
                "track": TRACK_NAMES[track],
                "planned_items": planned.get(track, np.nan),
                "submitted": len(e),
                "scored": scored,
                "skipped_or_unscored": len(e) - scored,
                "rubric_scores": RUBRIC_SIZE * scored,
                "annotators": e["evaluator"].nunique(),
                "system_track_cells": n_cells,
                "mean_scored_per_cell": scored / n_cells if n_cells else np.nan,
            }
        )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    total = {
        "track": "total",
        "planned_items": frame["planned_items"].sum(min_count=len(frame)),
        "submitted": int(frame["submitted"].sum()),
        "scored": int(frame["scored"].sum()),
        "skipped_or_unscored": int(frame["skipped_or_unscored"].sum()),
        "rubric_scores": int(frame["rubric_scores"].sum()),
        "annotators": evals["evaluator"].nunique(),
        "system_track_cells": int(frame["system_track_cells"].sum()),
    }
    total["mean_scored_per_cell"] = (
        total["scored"] / total["system_track_cells"] if total["system_track_cells"] else np.nan
    )
    return pd.concat([frame, pd.DataFrame([total])], ignore_index=True)


def alpha_table(
    evals: pd.DataFrame,
    criteria: Mapping[str, Sequence[str]],
    window_rho: Mapping[str, float],
) -> pd.DataFrame:
    """Table 21: ordinal alpha per track and criterion, its range, and the judges' window rho."""
    rows = []
    for track in JUDGE_TRACKS:
        e = evals[evals["track"] == track]
        if e.empty:
            continue
        row: dict[str, Any] = {"track": TRACK_NAMES[track]}
        alphas = []
        for i, crit in enumerate(criteria[track]):
            units = alpha_units(evals, track, crit)
            if i == 0:
                row["pairable_items"] = sum(len(u) >= 2 for u in units)
            a = krippendorff_alpha(units, "ordinal")
            row[f"alpha_{i + 1}"] = a
            alphas.append(a)
        finite = [a for a in alphas if np.isfinite(a)]
        row["alpha_min"] = min(finite) if finite else np.nan
        row["alpha_max"] = max(finite) if finite else np.nan
        row["judges_window_vs_full_spearman"] = window_rho.get(track, np.nan)
        rows.append(row)
    if np.isfinite(window_rho.get("total", np.nan)):
        rows.append(
            {"track": "Total Average", "judges_window_vs_full_spearman": window_rho["total"]}
        )
    return pd.DataFrame(rows)


def select_examples(cube: ScoreCube, examples: Collection[str]) -> ScoreCube:
    """The cube restricted to ``examples`` (kept in the cube's order; unknown ids ignored)."""
    wanted = set(examples)
    idx = [i for i, e in enumerate(cube.examples) if e in wanted]
    return replace(
        cube,
        examples=tuple(cube.examples[i] for i in idx),
        values=cube.values[:, :, idx],
        valid=cube.valid[:, :, idx],
        has_rows=cube.has_rows[:, :, idx],
        present=cube.present[:, idx],
        missing=cube.missing[:, :, idx],
        error=None if cube.error is None else cube.error[:, :, idx],
    )


def human_tables(
    study: HumanStudy,
    cube: ScoreCube,
    lb: pd.DataFrame,
    criterion_means: Mapping[str, pd.DataFrame] | None = None,
    paradigms: Mapping[str, str] | None = None,
    exclude: Collection[str] = (),
    no_paradigms: str = "no paradigms known",
) -> dict[int, StatTable | str]:
    """Tables 18–21 (number -> table, or why it is absent).  ``cube`` and ``lb`` are the
    comparable (non-oracle) systems' cube and leaderboard; ``criterion_means`` the judges'
    per-track criterion scores (systems x criteria) for the track–rubric rows of Table 19."""
    from omnistory_eval.judges.rubric import CRITERIA

    from omnistory_report.analysis.leaderboard import leaderboard

    evals = evaluations(study.frame)
    out: dict[int, StatTable | str] = {}
    plan_note = (
        ""
        if study.plan
        else "No study plan next to the scores table (human_plan.json, written by `human "
        "import`): planned items unknown, cells are the systems with ratings."
    )
    out[18] = StatTable(
        "Human-evaluation counts (one evaluation = one annotator's four rubric scores for one "
        "item; integrated = omni)",
        counts_table(evals, study.plan),
        plan_note,
    )
    comparable = evals[~evals["system"].isin(list(exclude))]
    judges = judge_track_means(lb)
    if criterion_means:
        judges = judges.join(criterion_judge_means(criterion_means))
    window = study.window
    window_lb = leaderboard(select_examples(cube, window)) if cube.systems else None
    judges_window = judge_track_means(window_lb) if window_lb is not None else None
    agreement = agreement_table(comparable, judges, window, judges_window)
    out[19] = StatTable(
        "Human ratings vs the three-judge means across systems (Spearman, Kendall tau-b, "
        "Pearson; two-sided p-values, descriptive)",
        agreement,
        "Human means weight each scored evaluation equally after averaging its four rubric "
        "scores; judge means are the valid-only three-judge track scores over every transition. "
        "LOTO: leave one window transition's human ratings out (judges fixed); a sensitivity "
        "range, not a confidence interval. spearman_window_judges: judges restricted to the "
        f"window ({len(window)} transitions).",
    )
    human = human_system_means(comparable)
    if not paradigms:
        out[20] = no_paradigms
    else:
        table = paradigm_table(human, judges, paradigms)
        same = same_ordering(table)
        agree = [m for m, s in same.items() if s]
        differ = [m for m, s in same.items() if not s]
        out[20] = StatTable(
            "Paradigm-tier means of human ratings and three-judge scores (rank 1 = best)",
            table,
            f"Same paradigm ordering: {', '.join(agree) or 'none'}; different: "
            f"{', '.join(differ) or 'none'}.",
        )
    window_rho: dict[str, float] = {}
    if window_lb is not None:
        for track in JUDGE_TRACKS:
            window_rho[track] = _corr(*_aligned(judges_window, judges, track))["spearman"]
        full = lb.set_index("system")["total"].astype(float).to_frame()
        win = window_lb.set_index("system")["total"].astype(float).to_frame()
        window_rho["total"] = _corr(*_aligned(win, full, "total"))["spearman"]
    out[21] = StatTable(
        "Ordinal Krippendorff alpha between annotators per track (criteria 1–4 and range), and "
        "the judges' system-ranking Spearman on the window vs every transition",
        alpha_table(evals, CRITERIA, window_rho),
        "alpha_i: criterion i of the track's rubric (metadata alignment, continuity, condition "
        "compliance, ground-truth consistency); units are the items with at least two scored "
        "evaluations. The last column is not a human-judge correlation.",
    )
    return out
