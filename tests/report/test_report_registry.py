"""The table registry: what it lists, the task's tables declared from it, the needs it reads
lazily, and the report's files unchanged since it replaced the long driver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omnistory_report import context, rundir
from omnistory_report.analysis import bootstrap
from omnistory_report.analysis.paper_tables import (
    FIGURE_ITEMS,
    NO_HUMAN,
    NO_LENGTHS,
    NO_PARADIGMS,
    TABLE_ITEMS,
)
from omnistory_report.analysis.statistics import STATISTICS
from omnistory_report.command import build_report
from omnistory_report.context import NEEDS
from omnistory_report.registry import (
    PAPER_TABLES,
    STATISTICS_TABLES,
    select,
    task_tables,
)
from report_helpers import build_golden_report, output_digests

from omnistory_core.builtin.omnistorybench import OMNISTORYBENCH

DIGESTS = Path(__file__).parent / "data" / "report_digests.json"
QUICK = {"bootstrap": 20, "weight_draws": 20, "print_table": False}


def test_every_statistic_and_paper_item_once_in_the_report_order():
    slugs = [t.slug for t in PAPER_TABLES]
    assert len(set(slugs)) == len(slugs)
    assert slugs[0] == "leaderboard"
    assert [t.slug for t in STATISTICS_TABLES] == list(STATISTICS)
    # the paper's tables, then its figures, each in number order (the index's order)
    papers = [t.paper for t in PAPER_TABLES if t.paper is not None]
    assert papers == [*TABLE_ITEMS, *FIGURE_ITEMS]
    assert all(t.slug == t.paper.stem for t in PAPER_TABLES if t.paper is not None)
    for t in PAPER_TABLES:
        assert t.needs <= set(NEEDS), t.slug
        assert set(t.absent) <= t.needs, t.slug
        assert t.write in ("leaderboard", "table", "figure"), t.slug


def test_the_task_declares_exactly_the_registry():
    declared = [(t.slug, t.title, tuple(t.needs)) for t in OMNISTORYBENCH.tables]
    registry = [(t.slug, t.title, tuple(t.needs)) for t in task_tables()]
    assert declared == registry
    needs = {t.slug: frozenset(t.needs) for t in OMNISTORYBENCH.tables}
    assert needs == {t.slug: t.needs for t in PAPER_TABLES}


def test_unknown_tables_are_refused():
    assert select(["leaderboard", "table30_narration_length"])[1].slug == "table30_narration_length"
    with pytest.raises(ValueError, match="unknown tables"):
        select(["leaderboard", "table99"])


def test_a_selection_reads_only_what_it_needs(synthetic_run, tmp_path, monkeypatch):
    """The leaderboard alone reads no narration, loads no dataset and draws no bootstrap; the
    failures alone do not even read the scores table."""
    called = []
    monkeypatch.setattr(context, "load_examples", lambda runs: called.append("examples"))
    monkeypatch.setattr(rundir, "lengths_frame", lambda runs: called.append("lengths"))
    monkeypatch.setattr(bootstrap, "paired_bootstrap", lambda *a: called.append("bootstrap"))
    out = build_report(
        synthetic_run.scores,
        tmp_path / "report",
        run_dir=synthetic_run.run_dir,
        tables=["leaderboard"],
        html=False,
        **QUICK,
    )
    assert called == []
    assert sorted(p.name for p in out.iterdir()) == [
        "leaderboard.csv",
        "leaderboard.md",
        "paper_tables.json",
        "tables",
    ]
    assert json.loads((out / "paper_tables.json").read_text()) == {}

    broken = tmp_path / "broken.jsonl"
    broken.write_text("not a scores table\n")
    run = synthetic_run.run_dir
    out = build_report(broken, tmp_path / "failures", run_dir=run, tables=["failures"], html=False)
    assert (out / "tables" / "failures.csv").is_file()
    with pytest.raises(ValueError):
        build_report(broken, tmp_path / "lb", tables=["leaderboard"], html=False, **QUICK)


def test_unmet_needs_give_the_index_its_reasons(synthetic_run, tmp_path):
    wanted = [t.slug for t in PAPER_TABLES if t.needs - {"scores"}]
    out = build_report(
        synthetic_run.scores, tmp_path / "report", tables=wanted, html=False, **QUICK
    )
    index = json.loads((out / "paper_tables.json").read_text())
    assert list(index) == [
        "Table 4",
        "Table 13",
        *(f"Table {n}" for n in range(18, 22)),
        "Table 30",
    ]
    assert index["Table 4"]["absent"] == index["Table 13"]["absent"] == NO_PARADIGMS
    assert index["Table 30"]["absent"] == NO_LENGTHS
    assert all(index[f"Table {n}"]["absent"] == NO_HUMAN for n in (18, 19, 20, 21))
    assert not (out / "tables" / "failures.csv").exists()  # needs the run directory


def test_the_report_files_are_those_of_the_report_before_the_registry(rich_run, tmp_path):
    """Digests of the files the long driver wrote for this run (tables, notes, index, page):
    the registry writes the same bytes.  A deliberate change of a table regenerates them:
    ``json.dumps(output_digests(report), indent=1, sort_keys=True)``."""
    out = build_golden_report(rich_run, tmp_path / "report")
    expected = json.loads(DIGESTS.read_text())
    digests = output_digests(out)
    assert sorted(digests) == sorted(expected)
    changed = sorted(name for name in expected if digests[name] != expected[name])
    assert not changed, f"files that differ from before: {changed}"
