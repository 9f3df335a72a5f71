"""The leaderboard of Appendix E.5 (valid-only) and F.4 (zero-filled).

Valid-only, per track: each judge's per-example score is the mean of its four criteria; the judge's
system score is the mean over its valid examples; the track score J is the equal-weight mean of the
judges that have at least one valid example (a judge with none is left out and reported by
:func:`judge_coverage`).  Zero-filled divides the same sums by the number of examples of the system
and keeps every judge that was run on the system (its mean is then 0, not undefined).

Automatic metrics use their own valid examples; metrics stay on their native 0–1 scale in the table
and are multiplied by 10 inside Total Average and the modality scores.

An example whose evaluator could not answer (``error`` rows) is left out of that cell under both
policies — it is neither a valid score nor a zero.  ``errors_<component>`` counts those examples per
system; a component (and every total built from it) with a non-zero count is *incomplete*, and the
report marks it (:func:`incomplete_columns`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from omnistory_core.builtin.omnistorybench import OMNISTORYBENCH
from omnistory_core.tasks import Column
from omnistory_report.analysis.cube import JUDGE_TRACKS, METRICS, MODALITY_TRACKS, ScoreCube
from omnistory_report.analysis.frame import category_codes, column_values

LEADERBOARD_COLUMNS: tuple[str, ...] = (
    "system",
    "n_examples",
    "bertscore",
    "clip",
    "speech_meta",
    "judge_text",
    "judge_image",
    "judge_speech",
    "judge_omni",
    "total",
    "bertscore_zero",
    "clip_zero",
    "speech_meta_zero",
    "judge_text_zero",
    "judge_image_zero",
    "judge_speech_zero",
    "judge_omni_zero",
    "total_zero",
    "text_score",
    "image_score",
    "speech_score",
    "traditional_total",
    "missing_text",
    "missing_image",
    "missing_speech",
    "errors_bertscore",
    "errors_clip",
    "errors_speech_meta",
    "errors_judge_text",
    "errors_judge_image",
    "errors_judge_speech",
    "errors_judge_omni",
)


def _component_name(column: Column) -> str:
    """A leaderboard column's name here: the metric's name, or ``judge_<track>``."""
    return f"judge_{column.track}" if column.evaluator == "judge" else column.evaluator


#: the Total Average's components, in the order and on the scales Omni-StoryBench's task declares
#: (``OMNISTORYBENCH.aggregation.columns``): bertscore, clip, speech_meta, judge_text, judge_image,
#: judge_speech, judge_omni
TOTAL_COLUMNS: tuple[Column, ...] = OMNISTORYBENCH.aggregation.columns
COMPONENTS: tuple[str, ...] = tuple(_component_name(c) for c in TOTAL_COLUMNS)
POLICIES = ("valid", "zero")


def cell_means(cube: ScoreCube) -> pd.DataFrame:
    """One row per (cell, system) with sums, counts and both policies' means.

    Columns: ``kind, track, evaluator, system, n_rows_examples, n_valid, n_error, n_examples,
    sum, valid_mean, zero_mean``.  ``valid_mean`` is NaN without a valid example; ``zero_mean`` is
    NaN only when the cell has no row with an outcome for the system.  ``n_error`` examples (the
    evaluator could not answer) are in neither mean's denominator.
    """
    sums = (cube.values * cube.valid).sum(axis=2)
    n_valid = cube.valid.sum(axis=2)
    n_rows = cube.has_rows.sum(axis=2)
    n_error = cube.errors.sum(axis=2)
    n_scored = cube.scored.sum(axis=2)
    n_examples = cube.n_examples
    out = []
    for k, cell in enumerate(cube.cells):
        with np.errstate(invalid="ignore", divide="ignore"):
            valid_mean = np.where(n_valid[k] > 0, sums[k] / n_valid[k], np.nan)
            zero_mean = np.where(n_rows[k] > 0, sums[k] / np.maximum(n_scored[k], 1), np.nan)
        out.append(
            pd.DataFrame(
                {
                    "kind": cell.kind,
                    "track": cell.track,
                    "evaluator": cell.evaluator,
                    "system": cube.systems,
                    "n_rows_examples": n_rows[k],
                    "n_valid": n_valid[k],
                    "n_error": n_error[k],
                    "n_examples": n_examples,
                    "sum": sums[k],
                    "valid_mean": valid_mean,
                    "zero_mean": zero_mean,
                }
            )
        )
    if not out:
        return pd.DataFrame(
            columns=[
                "kind",
                "track",
                "evaluator",
                "system",
                "n_rows_examples",
                "n_valid",
                "n_error",
                "n_examples",
                "sum",
                "valid_mean",
                "zero_mean",
            ]
        )
    return pd.concat(out, ignore_index=True)


def aggregate_cells(cube: ScoreCube, means: np.ndarray, include: np.ndarray) -> np.ndarray:
    """Components from per-cell means: (..., K, S) means and inclusion mask -> (..., 7, S).

    Metrics are taken as they are (NaN when not included); each judge track is the equal-weight
    mean over its included judges (NaN when none is).  Shared by the point estimate and every
    bootstrap replicate, so both follow one aggregation order.
    """
    lead = means.shape[:-2]
    n_sys = means.shape[-1]
    comps = np.full((*lead, len(COMPONENTS), n_sys), np.nan)
    for j, name in enumerate(METRICS):
        k = cube.metric_index(name)
        if k is not None:
            comps[..., j, :] = np.where(include[..., k, :], means[..., k, :], np.nan)
    for j, track in enumerate(JUDGE_TRACKS, start=len(METRICS)):
        ks = cube.judge_indices(track)
        if not ks:
            continue
        inc = include[..., ks, :]
        total = np.where(inc, means[..., ks, :], 0.0).sum(axis=-2)
        n_inc = inc.sum(axis=-2)
        with np.errstate(invalid="ignore", divide="ignore"):
            comps[..., j, :] = np.where(n_inc > 0, total / np.maximum(n_inc, 1), np.nan)
    return comps


def component_matrix(cube: ScoreCube, policy: str = "valid") -> np.ndarray:
    """(7, S) array of the Total Average components on their native scales, NaN where undefined.

    Order: BERTScore, CLIP, speech metadata (0–1), judge text, image, speech, omni (1–10).
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    sums = (cube.values * cube.valid).sum(axis=2)
    if policy == "valid":
        denom = cube.valid.sum(axis=2)
        include = denom > 0
    else:
        denom = cube.scored.sum(axis=2)  # the system's examples, less those whose evaluator erred
        include = np.asarray(cube.has_rows.any(axis=2))
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(include, sums / np.maximum(denom, 1), np.nan)
    return aggregate_cells(cube, means, include)


def total_average(comps: np.ndarray) -> np.ndarray:
    """The task's Total Average: its columns on their declared scales, summed in order, divided
    by their number ((10·BERT + 10·CLIP + 10·Meta + J_t + J_i + J_s + J_o) / 7 for
    Omni-StoryBench)."""
    total = TOTAL_COLUMNS[0].scale * comps[0]
    for column, values in zip(TOTAL_COLUMNS[1:], comps[1:], strict=True):
        total = total + (values if column.scale == 1.0 else column.scale * values)
    return total / len(TOTAL_COLUMNS)


def totals(comps: np.ndarray) -> dict[str, np.ndarray]:
    """Total Average, modality scores and the traditional total from a (7, S) component array."""
    bert, clip, meta, jt, ji, js, jo = comps
    return {
        "total": total_average(comps),
        "text_score": (10 * bert + jt) / 2,
        "image_score": (10 * clip + ji) / 2,
        "speech_score": (10 * meta + js) / 2,
        "traditional_total": 10 / 3 * (bert + clip + meta),
    }


def leaderboard(cube: ScoreCube) -> pd.DataFrame:
    """The leaderboard with exactly :data:`LEADERBOARD_COLUMNS`, best valid-only total first."""
    valid = component_matrix(cube, "valid")
    zero = component_matrix(cube, "zero")
    tv, tz = totals(valid), totals(zero)
    data: dict[str, object] = {"system": list(cube.systems), "n_examples": cube.n_examples}
    for j, name in enumerate(COMPONENTS):
        data[name] = valid[j]
    data["total"] = tv["total"]
    for j, name in enumerate(COMPONENTS):
        data[f"{name}_zero"] = zero[j]
    data["total_zero"] = tz["total"]
    for name in ("text_score", "image_score", "speech_score", "traditional_total"):
        data[name] = tv[name]
    missing = cube.missing.sum(axis=2)
    for m, track in enumerate(MODALITY_TRACKS):
        data[f"missing_{track}"] = missing[m]
    errors = component_errors(cube)
    for j, name in enumerate(COMPONENTS):
        data[f"errors_{name}"] = errors[j]
    frame = pd.DataFrame(data, columns=list(LEADERBOARD_COLUMNS))
    return sort_leaderboard(frame)


def has_paper_scores(lb: pd.DataFrame) -> bool:
    """Whether any system has a number in any Total Average component (valid-only or
    zero-filled): a leaderboard of systems whose every score is missing shows nothing but dashes,
    as after a run scored by stand-in metrics alone."""
    cols = [c for c in (*COMPONENTS, *(f"{n}_zero" for n in COMPONENTS)) if c in lb.columns]
    return bool(cols) and bool(lb[cols].notna().to_numpy().any())


def component_errors(cube: ScoreCube) -> np.ndarray:
    """(7, S) examples per system whose evaluator could not answer, per Total Average component
    (a judge track counts an example when any of its judges erred on it)."""
    out = np.zeros((len(COMPONENTS), len(cube.systems)), dtype=np.int64)
    errors = cube.errors
    for j, name in enumerate(METRICS):
        k = cube.metric_index(name)
        if k is not None:
            out[j] = errors[k].sum(axis=1)
    for j, track in enumerate(JUDGE_TRACKS, start=len(METRICS)):
        ks = cube.judge_indices(track)
        if ks:
            out[j] = errors[ks].any(axis=0).sum(axis=1)
    return out


#: the leaderboard columns each component feeds (the component's own, with its ``_zero`` twin)
_FED_BY: dict[str, tuple[str, ...]] = {
    "bertscore": ("text_score", "traditional_total"),
    "clip": ("image_score", "traditional_total"),
    "speech_meta": ("speech_score", "traditional_total"),
    "judge_text": ("text_score",),
    "judge_image": ("image_score",),
    "judge_speech": ("speech_score",),
    "judge_omni": (),
}


def incomplete_columns(row: object) -> set[str]:
    """The score columns of one leaderboard row (a ``Series`` or an ``itertuples`` row) computed
    without some examples because their evaluator could not answer."""
    out: set[str] = set()
    for name in COMPONENTS:
        if float(getattr(row, f"errors_{name}", 0) or 0) > 0:
            out |= {name, f"{name}_zero", "total", "total_zero", *_FED_BY[name]}
    return out


def sort_leaderboard(frame: pd.DataFrame, by: str = "total") -> pd.DataFrame:
    """Descending by ``by`` (NaN last), ties broken by system name."""
    order = np.lexsort((frame["system"].to_numpy(), -frame[by].fillna(-np.inf).to_numpy()))
    return frame.iloc[order].reset_index(drop=True)


def modality_frame(lb: pd.DataFrame, policy: str = "valid") -> pd.DataFrame:
    """Per-system modality scores (text, image, speech), omni judge and total for one policy.

    Indexed by system; used by the correlation and bottleneck analyses.
    """
    suffix = "" if policy == "valid" else "_zero"
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    comps = np.vstack([lb[f"{c}{suffix}"].to_numpy(dtype=float) for c in COMPONENTS])
    t = totals(comps)
    return pd.DataFrame(
        {
            "text": t["text_score"],
            "image": t["image_score"],
            "speech": t["speech_score"],
            "omni": comps[6],
            "total": t["total"],
        },
        index=pd.Index(lb["system"], name="system"),
    )


def scaled_components(lb: pd.DataFrame, policy: str = "valid") -> pd.DataFrame:
    """The seven Total Average components with metrics scaled to 0–10, indexed by system."""
    suffix = "" if policy == "valid" else "_zero"
    data = {}
    for c in COMPONENTS:
        col = lb[f"{c}{suffix}"].to_numpy(dtype=float)
        data[c] = 10 * col if c in METRICS else col
    return pd.DataFrame(data, index=pd.Index(lb["system"], name="system"))


def judge_coverage(cube: ScoreCube) -> pd.DataFrame:
    """Per (system, track, judge): examples with rows, valid examples, examples whose judge could
    not answer (``n_error``, counted apart: neither invalid nor zero), and whether it is excluded.

    ``excluded_valid_only`` is True for a judge that answered on the system but has no valid
    example: it is left out of that track's valid-only mean (and counts 0 under zero-filled).
    """
    means = cell_means(cube)
    judges = means[means["kind"] == "judge"].copy()
    judges["excluded_valid_only"] = (judges["n_rows_examples"] > 0) & (judges["n_valid"] == 0)
    return judges[
        [
            "system",
            "track",
            "evaluator",
            "n_examples",
            "n_rows_examples",
            "n_valid",
            "n_error",
            "valid_mean",
            "zero_mean",
            "excluded_valid_only",
        ]
    ].reset_index(drop=True)


def criterion_scores(frame: pd.DataFrame, cube: ScoreCube, track: str) -> pd.DataFrame:
    """Valid-only per-criterion scores of one judge track (systems x criteria).

    E.5: "each criterion-level score uses the same judge-specific valid sets and the same
    equal-weight averaging across judges".
    """
    ks = cube.judge_indices(track)
    criteria = cube.judge_criteria.get(track, ())
    if not ks:
        return pd.DataFrame(index=pd.Index(cube.systems, name="system"))
    rows = frame[(frame["kind"] == "judge") & (frame["track"] == track)]
    s_code = category_codes(rows["system"], cube.systems)
    e_code = category_codes(rows["example_id"], cube.examples)
    c_code = category_codes(rows["criterion"], criteria)
    evaluators = column_values(rows["evaluator"])
    score = rows["score"].to_numpy(dtype=float)
    n_sys, n_crit = len(cube.systems), len(criteria)
    per_judge = []
    for k in ks:
        mine = evaluators == cube.cells[k].evaluator
        ok = mine & cube.valid[k][s_code, e_code]
        flat = s_code[ok] * n_crit + c_code[ok]
        sums = np.bincount(flat, weights=score[ok], minlength=n_sys * n_crit).reshape(n_sys, n_crit)
        n_valid = cube.valid[k].sum(axis=1)[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            per_judge.append(np.where(n_valid > 0, sums / np.maximum(n_valid, 1), np.nan))
    stacked = np.stack(per_judge)
    with np.errstate(invalid="ignore"):
        counts = np.isfinite(stacked).sum(axis=0)
        mean = np.where(counts > 0, np.nansum(stacked, axis=0) / np.maximum(counts, 1), np.nan)
    return pd.DataFrame(mean, index=pd.Index(cube.systems, name="system"), columns=list(criteria))
