"""Report figures with matplotlib (Agg canvas, no pyplot state): PNG + SVG each.

Figure 3 (Total Average ranking by paradigm; Figure 14 is the same under zero-filled scoring),
Figure 4 (missing outputs per modality), Figure 13 (valid-only vs zero-filled), the modality
correlation heatmap, Figure 5 (BERTScore vs text-judge criteria by paradigm), Figure 6 (image-judge
category scores by paradigm), Figure 7 (judge scores across systems per track) and Figure 12
(integrated categories by paradigm and their partial correlations).  Oracle systems are hatched
and labelled.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

PARADIGM_COLORS: dict[str, str] = {
    "orchestration": "#1f77b4",
    "semi-orchestration": "#ff7f0e",
    "any-to-any": "#2ca02c",
    "baseline": "#7f7f7f",
    "unknown": "#bcbcbc",
}
MODALITY_COLORS = {"text": "#4c72b0", "image": "#dd8452", "speech": "#55a868", "plan": "#c44e52"}


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


#: PNG path -> the message of a figure written without data (see :func:`empty_reason`)
_EMPTY: dict[Path, str] = {}


def empty_reason(png: Path) -> str | None:
    """Why the figure last written to ``png`` by this process shows no data (None: it has data).

    Every figure is still written (the paper index names its file); the HTML report shows only
    those with data."""
    return _EMPTY.get(Path(png).resolve())


def _save(fig, out_dir: Path, stem: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / f"{stem}.png"
    fig.savefig(png, format="png", bbox_inches="tight")
    message = getattr(fig, "omnistory_empty", None)
    if message:
        _EMPTY[png.resolve()] = message
    else:
        _EMPTY.pop(png.resolve(), None)
    from matplotlib import rc_context

    # Text stays text in the SVG: searchable, selectable and smaller than glyph paths.
    with rc_context({"svg.fonttype": "none"}):
        fig.savefig(
            out_dir / f"{stem}.svg", format="svg", bbox_inches="tight", metadata={"Date": None}
        )
    return png


def _paradigm(info: pd.DataFrame, system: str) -> str:
    if system in info.index and info.loc[system, "paradigm"] in PARADIGM_COLORS:
        return str(info.loc[system, "paradigm"])
    return "unknown"


def _oracle(info: pd.DataFrame, system: str) -> bool:
    return bool(system in info.index and info.loc[system, "oracle"])


def _label(info: pd.DataFrame, system: str) -> str:
    return f"{system} (ORACLE)" if _oracle(info, system) else system


def _legend(ax, paradigms: list[str], oracle: bool) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=PARADIGM_COLORS[p], label=p) for p in paradigms]
    if oracle:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///", label="oracle"))
    if handles:
        ax.legend(handles=handles, loc="lower right", fontsize=8, frameon=True)


def _empty(ax, message: str) -> None:
    ax.figure.omnistory_empty = message
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


def ranking_figure(
    lb: pd.DataFrame,
    info: pd.DataFrame,
    out_dir: Path,
    column: str = "total",
    stem: str = "fig3_total_ranking",
) -> Path:
    """Figure 3 (``total``) or Figure 14 (``total_zero``): Total Average ranking coloured by
    paradigm (best at the top)."""
    policy = "zero-filled" if column == "total_zero" else "valid-only"
    data = lb[lb[column].notna()].sort_values([column, "system"], ascending=[False, True])
    fig = _figure(8, 1.2 + 0.28 * max(len(data), 1))
    ax = fig.add_subplot()
    if data.empty:
        _empty(ax, "No system has a complete Total Average yet")
        return _save(fig, out_dir, stem)
    y = np.arange(len(data))[::-1]
    systems = list(data["system"])
    colors = [PARADIGM_COLORS[_paradigm(info, s)] for s in systems]
    bars = ax.barh(y, data[column], color=colors, edgecolor="black", linewidth=0.4)
    for bar, s in zip(bars, systems, strict=True):
        if _oracle(info, s):
            bar.set_hatch("///")
    for yy, v in zip(y, data[column], strict=True):
        ax.text(v + 0.05, yy, f"{v:.2f}", va="center", fontsize=7)
    ax.set_yticks(y, [_label(info, s) for s in systems], fontsize=8)
    ax.set_xlim(0, max(10.0, float(data[column].max()) + 0.6))
    ax.set_xlabel(f"Total Average ({policy})")
    ax.set_title(f"Omni-StoryBench ranking by Total Average ({policy})")
    present = [p for p in PARADIGM_COLORS if any(_paradigm(info, s) == p for s in systems)]
    _legend(ax, present, any(_oracle(info, s) for s in systems))
    return _save(fig, out_dir, stem)


STAND_IN_FIGURE = "stand_in_leaderboard"


def stand_in_figure(table: pd.DataFrame, columns, info: pd.DataFrame, out_dir: Path) -> Path:
    """The stand-in leaderboard as grouped horizontal bars: one group per system (in the
    table's order, best at the top), one bar per scored (evaluator, criterion), valid-only.
    Every stand-in scores on 0-1, so one axis holds them all."""
    scored = [c for c in columns if c.scored]
    systems = [str(s) for s in table["system"]] if not table.empty else []
    fig = _figure(8, 1.4 + 0.22 * max(len(systems), 1) * max(len(scored), 1))
    ax = fig.add_subplot()
    if not systems or not scored:
        _empty(ax, "No stand-in metric scored this run")
        return _save(fig, out_dir / "figures", STAND_IN_FIGURE)
    height = 0.8 / len(scored)
    colors = [f"C{k % 10}" for k in range(len(scored))]
    base = np.arange(len(systems))[::-1].astype(float)
    for k, col in enumerate(scored):
        values = pd.to_numeric(table[col.label], errors="coerce").to_numpy(dtype=float)
        y = base + 0.4 - height * (k + 0.5)
        bars = ax.barh(
            y,
            np.nan_to_num(values),
            height=height,
            color=colors[k],
            edgecolor="black",
            linewidth=0.3,
            label=f"{col.evaluator}/{col.criterion}",
        )
        for bar, system in zip(bars, systems, strict=True):
            if _oracle(info, system):
                bar.set_hatch("///")
        for yy, v in zip(y, values, strict=True):
            ax.text(
                (0.0 if np.isnan(v) else v) + 0.01,
                yy,
                "n/a" if np.isnan(v) else f"{v:.2f}",
                va="center",
                fontsize=6,
            )
    ax.set_yticks(base, [_label(info, s) for s in systems], fontsize=8)
    ax.set_xlim(0, 1.1)
    ax.set_xlabel("valid-only mean (0-1)")
    ax.set_title("Stand-in metrics with real weights (not the paper's checkpoints)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=7)
    return _save(fig, out_dir / "figures", STAND_IN_FIGURE)


def missing_figure(
    lb: pd.DataFrame, info: pd.DataFrame, out_dir: Path, plan_errors: pd.Series | None = None
) -> Path:
    """Figure 4: plan (JSON) errors and missing outputs per modality, systems with any failure."""
    plan = plan_errors if plan_errors is not None else pd.Series(dtype="int64")
    table = pd.DataFrame(
        {
            "plan": [int(plan.get(s, 0)) for s in lb["system"]],
            "text": lb["missing_text"].to_numpy(int),
            "image": lb["missing_image"].to_numpy(int),
            "speech": lb["missing_speech"].to_numpy(int),
        },
        index=lb["system"],
    )
    table = table[table.sum(axis=1) > 0]
    fig = _figure(8, 1.4 + 0.3 * max(len(table), 1))
    ax = fig.add_subplot()
    if table.empty:
        _empty(ax, "No generation failures recorded")
        return _save(fig, out_dir, "fig4_missing_outputs")
    table = table.iloc[::-1]
    left = np.zeros(len(table))
    labels = {
        "plan": "orchestration JSON errors",
        "text": "missing text",
        "image": "missing image",
        "speech": "missing speech",
    }
    for key in ("plan", "text", "image", "speech"):
        if plan_errors is None and key == "plan":
            continue
        ax.barh(
            np.arange(len(table)),
            table[key],
            left=left,
            color=MODALITY_COLORS[key],
            label=labels[key],
        )
        left += table[key].to_numpy()
    ax.set_yticks(np.arange(len(table)), [_label(info, s) for s in table.index], fontsize=8)
    ax.set_xlabel("count (an example may count in several segments)")
    ax.set_title("Generation failures: JSON errors and missing outputs per modality")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, out_dir, "fig4_missing_outputs")


def valid_vs_zero_figure(lb: pd.DataFrame, info: pd.DataFrame, out_dir: Path) -> Path:
    """Figure 13: valid-only vs zero-filled Total Average, one point per system, with diagonal."""
    data = lb[lb["total"].notna() & lb["total_zero"].notna()]
    fig = _figure(6, 5.5)
    ax = fig.add_subplot()
    if data.empty:
        _empty(ax, "No system has both totals yet")
        return _save(fig, out_dir, "fig13_valid_vs_zero")
    for p, group in data.groupby(data["system"].map(lambda s: _paradigm(info, s))):
        ax.scatter(
            group["total"],
            group["total_zero"],
            color=PARADIGM_COLORS[p],
            label=p,
            edgecolor="black",
            linewidth=0.4,
            s=36,
            zorder=3,
        )
    lo = float(min(data["total"].min(), data["total_zero"].min())) - 0.2
    hi = float(max(data["total"].max(), data["total_zero"].max())) + 0.2
    ax.plot([lo, hi], [lo, hi], color="black", linestyle="--", linewidth=0.8, zorder=1)
    drop = (data["total"] - data["total_zero"]).sort_values(ascending=False)
    for s in drop.index[:5]:
        if drop[s] > 0:
            row = data.loc[s]
            ax.annotate(
                _label(info, row["system"]),
                (row["total"], row["total_zero"]),
                fontsize=7,
                xytext=(4, -8),
                textcoords="offset points",
            )
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("Total Average, valid-only")
    ax.set_ylabel("Total Average, zero-filled")
    ax.set_title("Valid-only vs zero-filled scoring")
    ax.legend(fontsize=8, loc="upper left")
    return _save(fig, out_dir, "fig13_valid_vs_zero")


def correlation_heatmap(matrix: pd.DataFrame, out_dir: Path) -> Path:
    """Pearson correlations between modality scores (valid-only), annotated."""
    fig = _figure(5.2, 4.4)
    ax = fig.add_subplot()
    values = matrix.to_numpy(float)
    off_diagonal = values[~np.eye(*values.shape, dtype=bool)] if values.size else values
    if matrix.empty or not np.isfinite(off_diagonal).any():
        # without two or more systems the matrix holds only its 1.00 diagonal
        _empty(ax, "Not enough systems for correlations")
        return _save(fig, out_dir, "fig_modality_correlations")
    im = ax.imshow(matrix.to_numpy(float), cmap="RdBu_r", vmin=-1, vmax=1)
    labels = list(matrix.columns)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yticks(range(len(labels)), labels)
    for i in range(len(labels)):
        for j in range(len(labels)):
            v = matrix.iloc[i, j]
            text = "—" if np.isnan(v) else f"{v:.2f}"
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=9,
                color="white" if abs(v) > 0.6 else "black",
            )
    fig.colorbar(im, ax=ax, shrink=0.8, label="Pearson r")
    ax.set_title("Correlations between modality scores (systems)")
    return _save(fig, out_dir, "fig_modality_correlations")


def image_categories_figure(criteria: pd.DataFrame, info: pd.DataFrame, out_dir: Path) -> Path:
    """Figure 6: valid-only image-judge criterion scores, averaged over systems per paradigm."""
    fig = _figure(8.5, 4.6)
    ax = fig.add_subplot()
    if criteria.empty or criteria.shape[1] == 0:
        _empty(ax, "No image-judge scores yet")
        return _save(fig, out_dir, "fig6_image_categories")
    paradigm = criteria.index.map(lambda s: _paradigm(info, s))
    means = criteria.groupby(paradigm).mean()
    means = means.loc[[p for p in PARADIGM_COLORS if p in means.index]]
    n_groups, n_bars = means.shape[1], means.shape[0]
    width = 0.8 / max(n_bars, 1)
    x = np.arange(n_groups)
    for b, (p, row) in enumerate(means.iterrows()):
        ax.bar(
            x + (b - (n_bars - 1) / 2) * width,
            row.to_numpy(float),
            width,
            color=PARADIGM_COLORS[p],
            label=p,
            edgecolor="black",
            linewidth=0.4,
        )
    names = [textwrap.fill(c.replace("_", " "), 18) for c in means.columns]
    ax.set_xticks(x, names, fontsize=8)
    ax.set_ylim(1, 10)
    ax.set_ylabel("image-judge score (1–10, valid-only)")
    ax.set_title("Image LLM-judge scores by category and paradigm")
    ax.legend(fontsize=8, loc="upper right")
    return _save(fig, out_dir, "fig6_image_categories")


def integrated_categories_figure(
    paradigm_means: pd.DataFrame, partials: pd.DataFrame, out_dir: Path
) -> Path:
    """Figure 12: (a) mean integrated-judge category scores per paradigm, (b) partial correlation
    of each category with each modality score, controlling for the other two (valid-only)."""
    stem = "figure12_integrated_category_diagnostics"
    fig = _figure(12, 4.8)
    ax_a, ax_b = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    cats = [c for c in paradigm_means.columns if c not in ("paradigm", "n_systems")]
    if paradigm_means.empty or not cats:
        _empty(ax_a, "No integrated-judge scores yet")
        _empty(ax_b, "No integrated-judge scores yet")
        return _save(fig, out_dir, stem)
    order = {p: i for i, p in enumerate(PARADIGM_COLORS)}
    paradigm_means = paradigm_means.sort_values(
        "paradigm", key=lambda col: col.map(lambda p: order.get(p, len(order)))
    )
    n_bars = len(paradigm_means)
    width = 0.8 / max(n_bars, 1)
    x = np.arange(len(cats))
    for b, (_, row) in enumerate(paradigm_means.iterrows()):
        p = str(row["paradigm"])
        ax_a.bar(
            x + (b - (n_bars - 1) / 2) * width,
            row[cats].to_numpy(float),
            width,
            color=PARADIGM_COLORS.get(p, PARADIGM_COLORS["unknown"]),
            label=p,
            edgecolor="black",
            linewidth=0.4,
        )
    names = [textwrap.fill(c.replace("_", " "), 18) for c in cats]
    ax_a.set_xticks(x, names, fontsize=7)
    ax_a.set_ylim(1, 10)
    ax_a.set_ylabel("integrated-judge score (1–10, valid-only)")
    ax_a.set_title("(a) Mean category scores by paradigm")
    ax_a.legend(fontsize=7, loc="upper right")
    matrix = partials.pivot(index="category", columns="modality", values="r")
    matrix = matrix.reindex(index=cats, columns=["text", "image", "speech"])
    ax_b.imshow(matrix.to_numpy(float), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    ax_b.set_xticks(range(3), ["text", "image", "speech"])
    ax_b.set_yticks(range(len(cats)), names, fontsize=7)
    for i in range(len(cats)):
        for j in range(3):
            v = float(matrix.iloc[i, j])
            ax_b.text(
                j,
                i,
                "—" if np.isnan(v) else f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=9,
                color="white" if abs(v) > 0.6 else "black",
            )
    ax_b.set_title("(b) Partial correlation with each modality score")
    return _save(fig, out_dir, stem)


def text_metrics_figure(
    lb: pd.DataFrame, criteria: pd.DataFrame, info: pd.DataFrame, out_dir: Path
) -> Path:
    """Figure 5: BERTScore (x10) and the text judge's four criteria, valid-only, averaged over the
    systems of each paradigm."""
    stem = "figure05_text_metrics"
    fig = _figure(9, 4.6)
    ax = fig.add_subplot()
    data = criteria.copy()
    bert = lb.set_index("system")["bertscore"].astype(float)
    data.insert(0, "BERTScore x10", 10 * bert.reindex(data.index))
    data = data.dropna(how="all")
    if data.empty or data.shape[1] < 2:
        _empty(ax, "No text scores yet")
        return _save(fig, out_dir, stem)
    means = data.groupby(data.index.map(lambda s: _paradigm(info, s))).mean()
    means = means.loc[[p for p in PARADIGM_COLORS if p in means.index]]
    n_bars = len(means)
    width = 0.8 / max(n_bars, 1)
    x = np.arange(means.shape[1])
    for b, (p, row) in enumerate(means.iterrows()):
        ax.bar(
            x + (b - (n_bars - 1) / 2) * width,
            row.to_numpy(float),
            width,
            color=PARADIGM_COLORS[str(p)],
            label=str(p),
            edgecolor="black",
            linewidth=0.4,
        )
    ax.set_xticks(x, [textwrap.fill(c.replace("_", " "), 18) for c in means.columns], fontsize=8)
    ax.set_ylim(0, 10)
    ax.set_ylabel("score (0–10, valid-only)")
    ax.set_title("Text evaluation metrics by paradigm: BERTScore vs text-judge criteria")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, out_dir, stem)


def judge_distributions_figure(lb: pd.DataFrame, out_dir: Path) -> Path:
    """Figure 7: distribution over systems of each track's judge score (valid-only, judges
    averaged equally), one box per track."""
    stem = "figure07_judge_distributions"
    fig = _figure(6.5, 4.4)
    ax = fig.add_subplot()
    tracks = ("text", "image", "speech", "omni")
    values = [lb[f"judge_{t}"].dropna().to_numpy(float) for t in tracks]
    if not any(len(v) for v in values):
        _empty(ax, "No judge scores yet")
        return _save(fig, out_dir, stem)
    ax.boxplot([v if len(v) else [np.nan] for v in values], showmeans=True)
    ax.set_xticks(range(1, len(tracks) + 1), ["text", "image", "speech", "integrated"])
    ax.set_ylim(1, 10)
    ax.set_ylabel("judge score per system (1–10, valid-only)")
    ax.set_title("LLM-judge scores across systems, per modality")
    return _save(fig, out_dir, stem)


def length_figure(
    lengths: pd.DataFrame,
    info: pd.DataFrame,
    out_dir: Path,
    reference: list[int] | None = None,
) -> Path:
    """Generated narration length (Unicode characters after trimming) per system, as box plots,
    with the reference narrations' lengths when the dataset is known."""
    groups = {
        _label(info, s): g["length"].to_numpy(float)
        for s, g in lengths.groupby("system", sort=True)
    }
    if reference:
        groups["reference"] = np.asarray(reference, dtype=float)
    fig = _figure(8, 1.2 + 0.45 * max(len(groups), 1))
    ax = fig.add_subplot()
    if not any(len(v) for v in groups.values()) or set(groups) <= {"reference"}:
        _empty(ax, "No generated narrations")
        return _save(fig, out_dir, "fig_narration_lengths")
    names = list(groups)[::-1]
    data = [groups[n] for n in names]
    try:
        ax.boxplot(data, orientation="horizontal", widths=0.6)
    except TypeError:  # matplotlib < 3.10
        ax.boxplot(data, vert=False, widths=0.6)
    ax.set_yticks(np.arange(1, len(names) + 1), names, fontsize=8)
    ax.set_xlabel("characters")
    ax.set_title("Generated narration length per system")
    return _save(fig, out_dir, "fig_narration_lengths")
