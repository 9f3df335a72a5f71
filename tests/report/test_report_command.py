"""The report command end to end on a synthetic run directory."""

from __future__ import annotations

import csv
import json
import os
import re

import numpy as np
import pandas as pd
import pytest
from omnistory_report.analysis import (
    LEADERBOARD_COLUMNS,
    build_cube,
    leaderboard,
    load_scores_frame,
)
from omnistory_report.command import build_report, main
from PIL import Image

from omnistory_core.scores import ScoreRow, read_scores, write_scores

FIGURES = (
    "fig3_total_ranking",
    "fig4_missing_outputs",
    "fig13_valid_vs_zero",
    "fig_modality_correlations",
    "fig6_image_categories",
)


def test_main_writes_leaderboard_tables_figures_and_html(synthetic_run, tmp_path, capsys):
    out = tmp_path / "report"
    argv = [
        "--scores",
        str(synthetic_run.scores),
        "--out",
        str(out),
        "--run-dir",
        str(synthetic_run.run_dir),
        "--bootstrap",
        "200",
        "--seed",
        "3",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "oracle-c (ORACLE)" in printed and "report written to" in printed

    with open(out / "leaderboard.csv", newline="") as fh:
        header = next(csv.reader(fh))
    assert tuple(header) == LEADERBOARD_COLUMNS
    written = pd.read_csv(out / "leaderboard.csv")
    expected = leaderboard(build_cube(load_scores_frame(synthetic_run.scores)))
    assert list(written["system"]) == list(expected["system"])
    for col in LEADERBOARD_COLUMNS[1:]:
        # full precision: the CSV round-trips the floats exactly
        np.testing.assert_array_equal(written[col].to_numpy(float), expected[col].to_numpy(float))

    md = (out / "leaderboard.md").read_text()
    assert "oracle-c ⚠ ORACLE" in md and "orch-a ⚠" not in md
    assert "semi-orchestration" in md

    for stem in FIGURES:
        with Image.open(out / "figures" / f"{stem}.png") as img:
            assert min(img.size) > 100
        assert (out / "figures" / f"{stem}.svg").read_text().lstrip().startswith("<?xml")
    ranking_svg = (out / "figures" / "fig3_total_ranking.svg").read_text()
    assert "oracle-c (ORACLE)" in ranking_svg

    for md_path in (out / "tables").glob("*.md"):
        assert md_path.with_suffix(".csv").is_file()
    boot = pd.read_csv(out / "tables" / "bootstrap_totals.csv")
    assert set(boot["system"]) == {"orch-a", "semi-b"}  # the oracle is not ranked
    assert (
        "Oracle systems left out: oracle-c" in (out / "tables" / "bootstrap_totals.md").read_text()
    )
    coverage = pd.read_csv(out / "tables" / "judge_coverage.csv")
    assert "oracle-c" in set(coverage["system"])  # descriptive tables keep it
    assert "200 draws, seed 3" in (out / "tables" / "bootstrap_totals.md").read_text()

    index = (out / "index.html").read_text()
    # the manifests name a dataset the loader does not know: pages fall back to outputs only
    assert "could not be loaded" in index
    assert len(list((out / "examples").glob("*.html"))) == 4


def test_build_report_with_examples_is_self_contained(synthetic_run, tmp_path):
    out = build_report(
        synthetic_run.scores,
        tmp_path / "r",
        synthetic_run.run_dir,
        examples=synthetic_run.examples,
        bootstrap=100,
        weight_draws=100,
        print_table=False,
    )
    pages = list(out.rglob("*.html"))
    assert len(pages) == 1 + 4 + 3  # index, examples, systems
    for page in pages:
        text = page.read_text()
        for ref in re.findall(r'(?:src|href)="([^"#]+)', text):
            assert not ref.startswith(("http:", "https:", "/")), f"{page}: external {ref}"
            assert (page.parent / ref).resolve().is_file(), f"{page}: broken link {ref}"

    ex2 = next(p for p in (out / "examples").glob("book2_p2-p3*.html"))
    html = ex2.read_text()
    assert "plan_json_error" in html and "bad JSON" in html  # semi-b failed on example 2
    assert 'class="badge oracle"' in html
    assert "Book &lt;2&gt; &amp; friends" in html  # escaped dataset text
    assert "orch-a narration 2 — ünïcode" in html
    assert html.count("<audio") == 2  # semi-b has no speech for example 2

    src = synthetic_run.run_dir / "dir-orch-a" / "image" / "2" / "generated.png"
    copied = next((out / "media").glob("orch-a-*/image/2.png"))
    assert copied.read_bytes() == src.read_bytes()
    assert os.stat(copied).st_ino == os.stat(src).st_ino  # hard link on the same file system

    lengths = pd.read_csv(out / "tables" / "length_per_system.csv").set_index("system")
    assert lengths.loc["(ground truth)", "mean_length"] == len("Reference 0.")
    failures = pd.read_csv(out / "tables" / "failures.csv")
    assert set(failures["system"]) == {"semi-b"}
    assert failures["count"].sum() == 3 and set(failures["category"]) == {"plan_json_error"}
    plans = pd.read_csv(out / "tables" / "paradigm_means.csv")
    assert set(plans["paradigm"]) == {"orchestration", "semi-orchestration"}  # oracle left out

    # rebuilding into the same folder works (media are replaced, not duplicated)
    build_report(
        synthetic_run.scores,
        out,
        synthetic_run.run_dir,
        examples=synthetic_run.examples,
        bootstrap=50,
        weight_draws=50,
        print_table=False,
    )
    assert len(list(out.rglob("*.html"))) == 8


def test_partial_sweep(synthetic_run, tmp_path):
    rows = [
        r
        for r in read_scores(synthetic_run.scores)
        if r.system == "orch-a" and not (r.track == "omni" and r.example_id.startswith("book3"))
    ]
    rows = [r for r in rows if not (r.evaluator == "clip" and r.example_id.startswith("book1"))]
    scores = tmp_path / "partial.jsonl"
    write_scores(scores, rows)
    out = build_report(
        scores,
        tmp_path / "r",
        synthetic_run.run_dir,
        examples=synthetic_run.examples,
        bootstrap=50,
        print_table=False,
    )
    lb = pd.read_csv(out / "leaderboard.csv")
    assert list(lb["system"]) == ["orch-a"] and lb["n_examples"][0] == 4
    index = (out / "index.html").read_text()
    assert "without scores yet: oracle-c, semi-b" in index
    # unscored systems still get their outputs shown on the example pages
    ex0 = next((out / "examples").glob("book0_*.html")).read_text()
    assert "semi-b narration 0" in ex0 and "no scores yet" in ex0


def test_no_html(synthetic_run, tmp_path):
    out = tmp_path / "r"
    assert (
        main(
            [
                "--scores",
                str(synthetic_run.scores),
                "--out",
                str(out),
                "--bootstrap",
                "20",
                "--no-html",
            ]
        )
        == 0
    )
    assert (out / "leaderboard.csv").is_file() and not (out / "index.html").exists()


def test_bad_scores_file_names_the_line(tmp_path, capsys):
    bad = tmp_path / "scores.jsonl"
    bad.write_text(json.dumps({"system": "s"}) + "\n")
    assert main(["--scores", str(bad), "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:1" in err and "example_id" in err


def test_missing_scores_file(tmp_path, capsys):
    assert main(["--scores", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "r")]) == 1
    assert "scores table not found" in capsys.readouterr().err


def test_bad_run_dir_manifest(synthetic_run, tmp_path, capsys):
    (synthetic_run.run_dir / "dir-orch-a" / "manifest.json").write_text("{oops")
    assert (
        main(
            [
                "--scores",
                str(synthetic_run.scores),
                "--out",
                str(tmp_path / "r"),
                "--run-dir",
                str(synthetic_run.run_dir),
                "--bootstrap",
                "10",
            ]
        )
        == 1
    )
    assert "dir-orch-a/manifest.json: not valid JSON" in capsys.readouterr().err


def test_unknown_option_is_rejected(synthetic_run, tmp_path):
    with pytest.raises(TypeError, match="bogus"):
        build_report(synthetic_run.scores, tmp_path / "r", bogus=1)


def test_bootstrap_must_be_positive(synthetic_run, tmp_path):
    assert (
        main(
            [
                "--scores",
                str(synthetic_run.scores),
                "--out",
                str(tmp_path / "r"),
                "--bootstrap",
                "0",
            ]
        )
        == 2
    )


def test_empty_and_single_row_tables_still_build(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = build_report(empty, tmp_path / "r0", bootstrap=10, print_table=False)
    assert pd.read_csv(out / "leaderboard.csv").columns.tolist() == list(LEADERBOARD_COLUMNS)
    assert (out / "index.html").is_file()
    one = tmp_path / "one.jsonl"
    write_scores(one, [ScoreRow("s", "e", "metric", "text", "bertscore", "f1", 0.5, "ok")])
    out = build_report(one, tmp_path / "r1", bootstrap=10, print_table=False)
    lb = pd.read_csv(out / "leaderboard.csv")
    assert lb["bertscore"][0] == 0.5 and np.isnan(lb["total"][0])
    assert "skipped" in (out / "tables" / "bootstrap_totals.md").read_text()


def test_sweep_without_scores_shows_outputs(synthetic_run, tmp_path):
    missing = tmp_path / "not-yet.jsonl"
    out = build_report(
        missing,
        tmp_path / "r",
        synthetic_run.run_dir,
        examples=synthetic_run.examples,
        bootstrap=10,
        print_table=False,
    )
    index = (out / "index.html").read_text()
    # what the run produced comes first; the scores are one line with the commands that make them
    assert index.index('id="run"') < index.index('id="figures"')
    assert index.count("No scores yet") == 1
    assert f"evaluate {synthetic_run.run_dir} --metrics bertscore,clip,speech_meta" in index
    assert "prefetch --metrics bertscore,clip,speech_meta --judges all --dry-run" in index
    assert 'id="leaderboard"' not in index and "No system has" not in index
    # Figure 4 from the run records: semi-b's failed plan left all three outputs of example 2
    assert "Figure 4: JSON errors and missing outputs per modality" in index
    assert "plan_json_error ×1" in index
    ex0 = next((out / "examples").glob("book0_*.html")).read_text()
    assert "orch-a narration 0" in ex0 and "<audio" in ex0
    assert pd.read_csv(out / "leaderboard.csv").empty
    with pytest.raises(FileNotFoundError):
        build_report(missing, tmp_path / "r2", bootstrap=10, print_table=False)
