"""The report's first section (what a run produced) and what it leaves out (figures and tables
without data); the browser view of the README demo's report is in test_report_html_chromium."""

from __future__ import annotations

import json

import pandas as pd
from omnistory_report import figures
from omnistory_report.command import build_report
from omnistory_report.html import _kv
from omnistory_report.rundir import calls_frame, outputs_frame, read_run_dir


def test_a_correlation_matrix_of_its_diagonal_alone_is_an_empty_figure(tmp_path):
    labels = ["text", "image"]
    diagonal = pd.DataFrame([[1.0, float("nan")], [float("nan"), 1.0]], labels, labels)
    png = figures.correlation_heatmap(diagonal, tmp_path)
    assert figures.empty_reason(png) == "Not enough systems for correlations"
    data = pd.DataFrame([[1.0, 0.4], [0.4, 1.0]], labels, labels)
    assert figures.empty_reason(figures.correlation_heatmap(data, tmp_path)) is None  # same file


def test_outputs_and_calls_per_system_from_the_run_records(synthetic_run):
    runs = read_run_dir(synthetic_run.run_dir)
    produced = outputs_frame(runs).set_index(["system", "modality"])
    assert produced.loc[("orch-a", "text")].tolist() == [4, 4, 0, ""]
    # semi-b's plan failed on example 2: nothing made for it in any modality
    assert produced.loc[("semi-b", "speech")].tolist() == [4, 3, 1, "plan_json_error ×1"]
    (synthetic_run.run_dir / "dir-orch-a" / "stats.json").write_text(
        json.dumps({"components": {"tts/espeak": {"calls": 3, "cache_hits": 1, "loads": 1}}})
    )
    calls = calls_frame(read_run_dir(synthetic_run.run_dir))
    assert calls.to_dict("records") == [
        {
            "system": "orch-a",
            "component": "tts/espeak",
            "calls": 3,
            "cache_hits": 1,
            "failures": 0,
            "loads": 1,
        }
    ]


def test_characters_and_conditions_render_as_small_tables():
    html = _kv(
        {
            "genre": "Fantasy",
            "characters": [
                {"name": "Pip", "species": "fox", "personality": ["quick", "brave"]},
                {"name": "Lena", "role": "protagonist"},
            ],
            "tags": ["night", "moon"],
        }
    )
    assert '<table class="records">' in html and html.count("<tr>") == 3
    header = html[html.index("<thead>") : html.index("</thead>")]
    assert [h in header for h in ("name", "species", "personality", "role")] == [True] * 4
    assert "quick, brave" in html and "night, moon" in html
    assert "{" not in html and "[" not in html  # no raw JSON


def test_a_scored_report_keeps_the_leaderboard_first_and_the_run_after(synthetic_run, tmp_path):
    out = build_report(
        synthetic_run.scores,
        tmp_path / "r",
        synthetic_run.run_dir,
        examples=synthetic_run.examples,
        bootstrap=10,
        weight_draws=10,
        print_table=False,
    )
    index = (out / "index.html").read_text()
    assert index.index('id="leaderboard"') < index.index('id="run"')
    assert "No scores yet" not in index
    shown = [p for p in (out / "figures").glob("*.png") if f'src="figures/{p.name}"' in index]
    assert shown and all(figures.empty_reason(p) is None for p in shown)
    # every linked table has numbers; the files of tables without data are still written
    for stem in (p.stem for p in (out / "tables").glob("*.csv")):
        linked = f'href="tables/{stem}.csv"' in index
        frame = pd.read_csv(out / "tables" / f"{stem}.csv") if linked else None
        assert frame is None or not frame.empty, stem
