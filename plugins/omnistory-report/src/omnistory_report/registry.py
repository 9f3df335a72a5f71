"""Every table and figure the report writes, declared once, in the order the report writes them.

A :class:`Table` names its file stem (``slug``), its title, what it needs (:data:`NEEDS`: the
scores table, the run directory, the dataset examples, human ratings), the function that makes it
from a :class:`~omnistory_report.context.Context` and how it is written (``leaderboard``,
``table``: CSV + Markdown, ``figure``: PNG + SVG).  :data:`PAPER_TABLES` lists them: the
leaderboard, the Appendix-F statistics, the failures, the report's figures, then the paper's
numbered tables and figures under their paper names.  :func:`make_and_write` runs one;
:mod:`omnistory_report.paper` writes the index of the paper's ones.  The docs' table of paper
tables (docs/reports.md, :func:`readme_table`) and the Omni-StoryBench task's ``tables``
(:func:`task_tables`) are generated from the same list.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd

from omnistory_core.tasks import PaperTable
from omnistory_report.analysis.paper_tables import (
    FIGURE_REASONS,
    FIGURE_STEMS,
    NO_HUMAN,
    NO_LENGTHS,
    NO_PARADIGMS,
    PaperItem,
    figure_item,
    table_item,
)
from omnistory_report.analysis.statistics import StatTable
from omnistory_report.context import NEEDS, Context, add_note

SCORES = frozenset({"scores"})
RUN_DIR = frozenset({"run_dir"})
SCORES_RUN_DIR = frozenset({"scores", "run_dir"})
HUMAN = frozenset({"scores", "human"})
NOTHING: frozenset[str] = frozenset()
NOT_PRODUCED = "not produced by `report` yet"

Write = Literal["leaderboard", "table", "figure"]


@dataclass(frozen=True)
class Figure:
    """A figure drawn and saved (PNG + SVG) by :mod:`omnistory_report.figures`."""

    title: str
    png: Path


#: what a table's ``make`` returns: the table or figure, why it is absent, or None when there
#: is nothing to write (a table of an optional input the run lacks)
Made = StatTable | Figure | pd.DataFrame | str | None


@dataclass(frozen=True, eq=False)
class Table:
    """One table or figure of the report.

    ``paper``: the paper's numbered table or figure it reproduces (listed in the index, which
    records ``absent[need]`` as the reason when a need is not met).  ``when`` and ``detail`` say
    for the docs (docs/reports.md) when the report writes it.  ``shown``: linked from the HTML page.
    ``errors_note``: carries the note on evaluator errors.
    """

    slug: str
    title: str
    needs: frozenset[str]
    make: Callable[[Context], Made]
    write: Write = "table"
    paper: PaperItem | None = None
    absent: Mapping[str, str] = field(default_factory=dict)
    when: str = "always"
    detail: str = ""
    shown: bool = True
    errors_note: bool = True

    def unmet(self, ctx: Context) -> str | None:
        """The first need (in :data:`NEEDS` order) the context cannot meet, or None."""
        return next((n for n in NEEDS if n in self.needs and not ctx.has(n)), None)


@dataclass(frozen=True)
class Written:
    """What running a table left: its file (relative to the report folder) or why it is absent
    (both None: nothing to write), and the title it was written under."""

    table: Table
    file: str | None = None
    absent: str | None = None
    title: str = ""


def _stat(slug: str, title: str, needs: frozenset[str] = SCORES) -> Table:
    return Table(slug, title, needs, lambda ctx: ctx.stat(slug))


def _figure(
    slug: str, title: str, make: Callable[[Context], Made], needs: frozenset[str] = SCORES
) -> Table:
    return Table(slug, title, needs, make, "figure")


def _left_out(ctx: Context) -> str:
    return f" (oracle systems left out: {', '.join(ctx.oracles)})" if ctx.oracles else ""


def _failures(ctx: Context) -> StatTable | None:
    from omnistory_report.analysis.failures import failure_table

    if ctx.failures.empty:
        return None
    title = "Failed outputs per system, modality and category (run records)"
    return StatTable(title, failure_table(ctx.failures))


def _missing_from_runs(produced: pd.DataFrame) -> pd.DataFrame:
    """Figure 4's input from the run records: outputs not written per system and modality."""
    if produced.empty:
        return pd.DataFrame(columns=["system", "missing_text", "missing_image", "missing_speech"])
    missing = produced.assign(missing=produced["examples"] - produced["written"])
    wide = missing.pivot(index="system", columns="modality", values="missing")
    return pd.DataFrame(
        {
            "system": wide.index,
            **{f"missing_{m}": wide[m].to_numpy(int) for m in ("text", "image", "speech")},
        }
    )


def _length_figure(ctx: Context) -> Figure | None:
    from omnistory_report.figures import length_figure

    if ctx.lengths is None or ctx.lengths.empty:
        return None
    png = length_figure(ctx.lengths, ctx.info, ctx.fig_dir, ctx.reference_lengths)
    return Figure("Generated narration length per system (characters)", png)


def _ranking_figure(ctx: Context) -> Figure:
    from omnistory_report.figures import ranking_figure

    png = ranking_figure(ctx.lb, ctx.info, ctx.fig_dir)
    return Figure("Figure 3: Total Average ranking by paradigm", png)


def _missing_figure(ctx: Context) -> Figure:
    from omnistory_report.figures import missing_figure

    # an unscored run has no leaderboard: count what the run records say is missing
    counts = ctx.lb if not ctx.lb.empty else _missing_from_runs(ctx.produced)
    png = missing_figure(counts, ctx.info, ctx.fig_dir, ctx.plan_errors)
    return Figure("Figure 4: JSON errors and missing outputs per modality", png)


def _valid_vs_zero_figure(ctx: Context) -> Figure:
    from omnistory_report.figures import valid_vs_zero_figure

    png = valid_vs_zero_figure(ctx.lb, ctx.info, ctx.fig_dir)
    return Figure("Figure 13: valid-only vs zero-filled", png)


def _correlation_heatmap(ctx: Context) -> Figure:
    from omnistory_report.analysis.correlations import correlation_matrix
    from omnistory_report.analysis.leaderboard import modality_frame
    from omnistory_report.figures import correlation_heatmap

    scores = modality_frame(ctx.comparable, "valid").dropna()
    matrix = correlation_matrix(scores, ["text", "image", "speech", "omni", "total"])
    png = correlation_heatmap(matrix, ctx.fig_dir)
    return Figure("Modality correlation heatmap (valid-only)" + _left_out(ctx), png)


def _criteria_frame(ctx: Context, track: str) -> pd.DataFrame | None:
    """A track's criterion scores per system (the oracle systems left out), if any."""
    table = ctx.stat(f"criterion_scores_{track}")
    if table is None:
        return None
    return table.frame.set_index("system").drop(index=ctx.oracles, errors="ignore")


def _image_categories_figure(ctx: Context) -> Figure:
    from omnistory_report.figures import image_categories_figure

    criteria = _criteria_frame(ctx, "image")
    criteria = criteria if criteria is not None else pd.DataFrame()
    png = image_categories_figure(criteria, ctx.info, ctx.fig_dir)
    return Figure("Figure 6: image-judge scores by category and paradigm" + _left_out(ctx), png)


def _paper_title(item: PaperItem) -> str:
    return f"{item.label}: {item.caption}"


def _copied_figure(number: int) -> Callable[[Context], Figure | str]:
    """A paper figure the report already draws under its older name, copied to its paper name."""
    item = figure_item(number)

    def make(ctx: Context) -> Figure | str:
        from omnistory_report.paper import copy_figure

        png = copy_figure(ctx.fig_dir, FIGURE_STEMS[number], item.stem)
        return Figure(_paper_title(item), png) if png is not None else NOT_PRODUCED

    return make


def _text_metrics_figure(ctx: Context) -> Figure:
    from omnistory_report.figures import text_metrics_figure

    criteria = _criteria_frame(ctx, "text")
    if criteria is None:
        criteria = pd.DataFrame(index=pd.Index(ctx.comparable["system"], name="system"))
    png = text_metrics_figure(ctx.comparable, criteria, ctx.info, ctx.fig_dir)
    return Figure(_paper_title(figure_item(5)), png)


def _judge_distributions_figure(ctx: Context) -> Figure:
    from omnistory_report.figures import judge_distributions_figure

    png = judge_distributions_figure(ctx.comparable, ctx.fig_dir)
    return Figure(_paper_title(figure_item(7)), png)


def _integrated_categories_figure(ctx: Context) -> Figure | str:
    from omnistory_report.figures import integrated_categories_figure

    partials = ctx.paper_table(12)
    means = ctx.paper_extra("integrated_category_paradigm_means")
    if isinstance(partials, str):
        return partials
    if means is None:
        return NOT_PRODUCED
    png = integrated_categories_figure(means.frame, partials.frame, ctx.fig_dir)
    return Figure(_paper_title(figure_item(12)), png)


def _zero_ranking_figure(ctx: Context) -> Figure:
    from omnistory_report.figures import ranking_figure

    item = figure_item(14)
    png = ranking_figure(ctx.lb, ctx.info, ctx.fig_dir, column="total_zero", stem=item.stem)
    return Figure(_paper_title(item), png)


def _paper_table(
    number: int,
    needs: frozenset[str] = SCORES,
    when: str = "always",
    detail: str = "",
    absent: Mapping[str, str] | None = None,
) -> Table:
    item = table_item(number)
    return Table(
        item.stem,
        item.caption,
        needs,
        lambda ctx: ctx.paper_table(number),
        paper=item,
        absent=absent or {},
        when=when,
        detail=detail,
    )


def _not_from_scores(number: int) -> Callable[[Context], str]:
    return lambda ctx: FIGURE_REASONS[number]


def _paper_figure(
    number: int,
    make: Callable[[Context], Made] | None = None,
    needs: frozenset[str] = SCORES,
    when: str = "always",
    detail: str = "",
) -> Table:
    item = figure_item(number)
    if make is None:  # a figure no scores table determines
        make, needs, when = _not_from_scores(number), NOTHING, "no"
    return Table(
        item.stem,
        item.caption,
        needs,
        make,
        write="figure",
        paper=item,
        when=when,
        detail=detail,
        shown=number not in FIGURE_STEMS,  # shown once, under the report's older name
    )


WITH_OMNI = "with integrated (omni) judge rows"
WITH_TWO = "with two complete systems"


def _paradigm_table(number: int) -> Table:
    detail = "the paradigm is in each system's manifest"
    absent = {"run_dir": NO_PARADIGMS}
    return _paper_table(number, SCORES_RUN_DIR, "with paradigms", detail, absent)


def _dreamsim_table(number: int) -> Table:
    return _paper_table(number, when="with DreamSim rows", detail="the `omnistory-dreamsim` metric")


def _human_table(number: int) -> Table:
    return _paper_table(number, HUMAN, "with human ratings", absent={"human": NO_HUMAN})


STATISTICS_TABLES: tuple[Table, ...] = (
    _stat("judge_coverage", "Judge coverage"),
    *(
        _stat(f"criterion_scores_{t}", f"Valid-only {t}-judge scores per criterion")
        for t in ("text", "image", "speech", "omni")
    ),
    _stat("supplementary_metrics", "Supplementary metrics outside Total Average, valid-only"),
    _stat("length_per_system", "Generated narration length per system", RUN_DIR),
    _stat("paradigm_means", "Mean Total Average by paradigm", SCORES_RUN_DIR),
    _stat("correlations_valid", "Pearson correlations between modality scores (valid-only)"),
    _stat("partial_correlations_valid", "Partial correlations of modality scores (valid-only)"),
    _stat("bottleneck_valid", "Modality-bottleneck diagnostics (valid-only)"),
    _stat("bottleneck_systems", "Within-modality ranks and weakest-modality gaps (valid-only)"),
    _stat("bottleneck_cutoffs", "Max Total among configurations with p <= alpha (valid-only)"),
    _stat("correlations_zero", "Pearson correlations between modality scores (zero-filled)"),
    _stat("partial_correlations_zero", "Partial correlations of modality scores (zero-filled)"),
    _stat("bottleneck_zero", "Modality-bottleneck diagnostics (zero-filled)"),
    _stat("bootstrap_totals", "Paired bootstrap of Total Average"),
    _stat("bootstrap_pairs", "Paired differences of Total Average (Holm)"),
    _stat("bootstrap_correlations", "Transition-bootstrap intervals of modality correlations"),
    _stat("judge_agreement_system", "System-level agreement between judges of a track"),
    _stat("judge_agreement_items", "Item-level agreement on jointly valid items"),
    _stat("panel_agreement", "Agreement between judge panels"),
    _stat("judge_calibration", "Judge means and between-system SD"),
    _stat("covariance_shares", "Component ranges, SDs and covariance shares of Total Average"),
    _stat("aggregation_variants", "Alternative aggregation rules vs equal weights"),
    _stat("weights_dirichlet", "Random Dirichlet(1,...,1) weights"),
    _stat("weights_dirichlet_winners", "Share of Dirichlet weight draws each system wins"),
    _stat("weights_uniform", "Random normalised U(0.5, 2) weights"),
    _stat("weights_uniform_winners", "Share of U(0.5, 2) weight draws each system wins"),
    _stat("length_correlations", "Narration length vs text judge and BERTScore", SCORES_RUN_DIR),
)

REPORT_FIGURES: tuple[Table, ...] = (
    # first on the page: the one figure an unscored run has
    _figure("fig_narration_lengths", "Narration length per system", _length_figure, RUN_DIR),
    _figure("fig3_total_ranking", "Total Average ranking by paradigm", _ranking_figure),
    _figure("fig4_missing_outputs", "JSON errors and missing outputs", _missing_figure),
    _figure("fig13_valid_vs_zero", "Valid-only vs zero-filled", _valid_vs_zero_figure),
    _figure("fig_modality_correlations", "Modality correlation heatmap", _correlation_heatmap),
    _figure("fig6_image_categories", "Image-judge scores by category", _image_categories_figure),
)

PAPER_TABLE_ENTRIES: tuple[Table, ...] = (
    _paper_table(1),
    _paper_table(2, when=WITH_TWO),
    _paper_table(3),
    _paradigm_table(4),
    _paper_table(5, NOTHING, "no", "dataset sources"),
    _paper_table(6, NOTHING, "no", "judge checkpoints: `judges list`"),
    _paper_table(7),
    _dreamsim_table(8),
    *(_paper_table(n) for n in (9, 10)),
    *(_paper_table(n, when=WITH_OMNI) for n in (11, 12)),
    _paradigm_table(13),
    _paper_table(14),
    _paper_table(15, when=WITH_TWO),
    *(_paper_table(n) for n in (16, 17)),
    *(_human_table(n) for n in (18, 19)),
    _paper_table(
        20,
        HUMAN | RUN_DIR,
        "with human ratings and paradigms",
        absent={"human": NO_HUMAN, "run_dir": NO_PARADIGMS},
    ),
    _human_table(21),
    _paper_table(22, when="with judges of two of the panels A, B, C"),
    _paper_table(23),
    _paper_table(24, when="with a complete Total Average"),
    _paper_table(25, when="with two complete Total Averages"),
    _paper_table(26, when="with a complete Total Average"),
    _paper_table(27, when="with three complete systems"),
    _paper_table(
        28,
        when="aggregation rules with three complete systems; length rows (M1, M2, clipped M1, "
        "quadratic log-length residuals) with narrations",
        detail="`--run-dir` for the length rows",
    ),
    _paper_table(29),
    _paper_table(30, RUN_DIR, "with narrations", absent={"run_dir": NO_LENGTHS}),
    _paper_table(31, when="with speech-metadata predictions"),
    _dreamsim_table(32),
)

PAPER_EXTRA_TABLES: tuple[Table, ...] = tuple(
    Table(stem, title, SCORES, lambda ctx, stem=stem: ctx.paper_extra(stem))
    for stem, title in (
        ("integrated_category_paradigm_means", "Integrated-judge category means per paradigm"),
        ("speech_field_accuracy", "Speech metadata accuracy per field and system"),
    )
)

_RENDERING = "this framework's rendering of "
PAPER_FIGURE_ENTRIES: tuple[Table, ...] = (
    *(_paper_figure(n, detail="illustrations") for n in (1, 2)),
    *(_paper_figure(n, _copied_figure(n)) for n in (3, 4)),
    _paper_figure(
        5, _text_metrics_figure, detail=_RENDERING + "BERTScore vs text-judge criteria by paradigm"
    ),
    _paper_figure(6, _copied_figure(6)),
    _paper_figure(
        7,
        _judge_distributions_figure,
        detail=_RENDERING + "the judge scores across systems per track",
    ),
    *(_paper_figure(n, detail="dataset examples") for n in (8, 9)),
    *(_paper_figure(n, detail="annotation interface screenshots") for n in (10, 11)),
    _paper_figure(12, _integrated_categories_figure, when=WITH_OMNI),
    _paper_figure(13, _copied_figure(13)),
    _paper_figure(14, _zero_ranking_figure),
)

#: every table and figure of the report, in the order it writes them
PAPER_TABLES: tuple[Table, ...] = (
    Table(
        "leaderboard",
        "Leaderboard (valid-only and zero-filled)",
        SCORES,
        lambda c: c.lb,
        "leaderboard",
    ),
    *STATISTICS_TABLES,
    # from the run records, which evaluator errors do not change: no note on them
    Table(
        "failures",
        "Failed outputs per system, modality and category",
        RUN_DIR,
        _failures,
        errors_note=False,
    ),
    *REPORT_FIGURES,
    *PAPER_TABLE_ENTRIES,
    *PAPER_EXTRA_TABLES,
    *PAPER_FIGURE_ENTRIES,
)


def select(slugs: Collection[str] | None = None) -> tuple[Table, ...]:
    """The registry's tables named in ``slugs`` (all when None), in the registry's order."""
    if slugs is None:
        return PAPER_TABLES
    unknown = sorted(set(slugs) - {t.slug for t in PAPER_TABLES})
    if unknown:
        raise ValueError(f"unknown tables {unknown}; see omnistory_report.registry.PAPER_TABLES")
    return tuple(t for t in PAPER_TABLES if t.slug in slugs)


# how each kind of table is written


def _write_leaderboard(ctx: Context, table: Table, made: Made) -> Written:
    from omnistory_report.tables import write_leaderboard

    assert isinstance(made, pd.DataFrame)
    write_leaderboard(made, ctx.info, ctx.out_dir)
    return Written(table, file="leaderboard.csv", title=table.title)


def _write_table(ctx: Context, table: Table, made: Made) -> Written:
    from omnistory_report.tables import write_table

    if made is None or isinstance(made, str):
        return Written(table, absent=made)
    assert isinstance(made, StatTable)
    if table.errors_note:
        made = add_note(made, ctx.incomplete)
    title = f"{table.paper.label}: {made.title}" if table.paper else made.title
    write_table(made.frame, ctx.tables_dir, table.slug, title, made.note)
    return Written(table, file=f"tables/{table.slug}.csv", title=title)


def _write_figure(ctx: Context, table: Table, made: Made) -> Written:
    if made is None or isinstance(made, str):
        return Written(table, absent=made)
    assert isinstance(made, Figure)  # drawn and saved by its make
    return Written(table, file=f"figures/{made.png.name}", title=made.title)


WRITERS: dict[str, Callable[[Context, Table, Made], Written]] = {
    "leaderboard": _write_leaderboard,
    "table": _write_table,
    "figure": _write_figure,
}


def make_and_write(ctx: Context, table: Table) -> Written:
    """Make ``table`` and write it, or record why it is absent when a need is not met."""
    need = table.unmet(ctx)
    if need is not None:
        return Written(table, absent=table.absent.get(need, "not computed"))
    return WRITERS[table.write](ctx, table, table.make(ctx))


# the lists generated from the registry


def task_tables() -> tuple[PaperTable, ...]:
    """The registry as the task declares it (``OMNISTORYBENCH.tables``)."""
    return tuple(
        PaperTable(t.slug, t.title, tuple(n for n in NEEDS if n in t.needs)) for t in PAPER_TABLES
    )


NEED_TEXT: dict[str, str] = {
    "scores": "the scores table",
    "human": "`kind: human` rows from `human import` (see below)",
    "run_dir": "`--run-dir`",
    "examples": "the dataset examples",
}


def _needs_text(table: Table) -> str:
    needs = [n for n in NEEDS if n in table.needs]
    shown = [n for n in needs if n != "scores"] or needs  # every table starts from the scores
    text = " and ".join(NEED_TEXT[n] for n in shown) or "not computed from scores"
    return f"{text} ({table.detail})" if table.detail else text


def _numbers(kind: str, numbers: list[int]) -> str:
    """``Tables 1–3, 7, 9`` (a run of three or more numbers as a range)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [f"{r[0]}–{r[-1]}" if len(r) >= 3 else ", ".join(map(str, r)) for r in runs]
    return f"{kind}{'s' if len(numbers) > 1 else ''} {', '.join(parts)}"


def readme_table() -> str:
    """The table of the paper's tables and figures in docs/reports.md (once the README's): when
    each is written, what it needs (tables with the same answers share a row)."""
    rows: dict[tuple[str, str, str], list[int]] = {}
    for t in PAPER_TABLES:
        if t.paper is not None:
            key = (t.paper.kind, t.when, _needs_text(t))
            rows.setdefault(key, []).append(t.paper.number)
    lines = ["| paper | written | needs |", "| --- | --- | --- |"]
    for (kind, when, needs), numbers in rows.items():
        lines.append(f"| {_numbers(kind.capitalize(), numbers)} | {when} | {needs} |")
    return "\n".join(lines) + "\n"
