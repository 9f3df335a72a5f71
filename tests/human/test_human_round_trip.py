"""human export -> a synthetic Label Studio export -> human import -> report Tables 18–21,
checked against values computed by hand from the construction in conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from human_helpers import SYSTEMS, Study, synthetic_export
from omnistory_eval.judges.rubric import CRITERIA
from omnistory_report.command import build_report
from omnistory_report.human.labelstudio import CONTROLS
from omnistory_testkit import run_cli

from omnistory_core.scores import read_scores


def _export(study: Study, *extra: str) -> Path:
    out = study.root / "ls"
    proc = run_cli(
        "human", "export", str(study.run_dir), "--out", str(out), "--window", "2", *extra,
        cwd=study.root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def _import(study: Study, export: Path, plan: Path | None = None):
    args = ["human", "import", str(export), "--scores", str(study.scores)]
    if plan is not None:
        args += ["--plan", str(plan)]
    return run_cli(*args, cwd=study.root)


def _table(report: Path, stem: str) -> pd.DataFrame:
    return pd.read_csv(report / "tables" / f"{stem}.csv")


def test_export_samples_a_common_window_for_every_system_and_track(study: Study) -> None:
    out = _export(study, "--start", "1")
    plan = json.loads((out / "plan.json").read_text())
    assert plan["window"] == study.examples[1:3]
    assert plan["systems"] == sorted(SYSTEMS)  # the oracle is left out
    assert plan["redundancy"] == 2
    assert len(plan["items"]) == 4 * 2 * 4  # systems x window x tracks
    keys = {(i["system"], i["example_id"], i["track"]) for i in plan["items"]}
    assert len(keys) == 32
    tasks = json.loads((out / "tasks.json").read_text())
    assert [t["data"]["item_id"] for t in tasks] == [i["item_id"] for i in plan["items"]]
    # blind: the task data carry an opaque id and the HTML, never a system's name or folder
    assert set(tasks[0]["data"]) == {"item_id", "html"}
    assert not any("dir-" in t["data"]["html"] for t in tasks)
    project = json.loads((out / "project.json").read_text())
    assert project["maximum_annotations"] == 2
    config = (out / "labeling_config.xml").read_text()
    for control in CONTROLS:
        assert f'<Rating name="{control}" toName="item" maxRating="10"' in config
    assert project["label_config"] == config
    # media copied and referenced through Label Studio's local-files URL
    html = {
        (i["system"], i["example_id"], i["track"]): t["data"]["html"]
        for t, i in zip(tasks, plan["items"], strict=True)
    }
    speech_a = html[("A", study.examples[1], "speech")]
    assert '<audio controls src="/data/local-files/?d=ls/media/s-' in speech_a
    url = speech_a.split('<audio controls src="/data/local-files/?d=ls/')[1].split('"')[0]
    assert (out / url).is_file()
    assert "Ground truth" in speech_a and "Current page" in speech_a  # demo dataset context
    assert "No speech output was generated" in html[("D", study.examples[1], "speech")]
    assert "No speech output" not in html[("D", study.examples[2], "speech")]


def test_export_is_deterministic_and_refuses_bad_options(study: Study, tmp_path: Path) -> None:
    a = _export(study)
    b = study.root / "ls2"
    assert run_cli(
        "human", "export", str(study.run_dir), "--out", str(b), "--window", "2", cwd=study.root
    ).returncode == 0  # fmt: skip
    assert (
        json.loads((a / "plan.json").read_text())["items"]
        == json.loads((b / "plan.json").read_text())["items"]
    )
    too_big = run_cli(
        "human", "export", str(study.run_dir), "--out", str(tmp_path / "x"), "--window", "4",
        cwd=study.root,
    )  # fmt: skip
    assert too_big.returncode == 2
    assert "needs 4 transitions" in too_big.stderr and "there are 3" in too_big.stderr
    assert not (tmp_path / "x").exists()
    again = run_cli(
        "human", "export", str(study.run_dir), "--out", str(a), "--window", "2", cwd=study.root
    )  # fmt: skip
    assert again.returncode == 2 and "already holds an export" in again.stderr


def test_round_trip_tables_18_to_21_match_hand_computed_values(study: Study) -> None:
    out = _export(study, "--start", "0")
    export = out / "project-1-at-2026-12-01.json"
    export.write_text(json.dumps(synthetic_export(out)))
    proc = _import(study, export, out / "plan.json")
    assert proc.returncode == 0, proc.stderr
    assert "imported 66 evaluations (64 scored, 2 skipped or unscored)" in proc.stdout

    human = [r for r in read_scores(study.scores) if r.kind == "human"]
    assert len(human) == 66 * 4
    first = next(r for r in human if r.track == "text" and r.system == "A")
    assert first.criterion in CRITERIA["text"] and first.evaluator.startswith("annotator:")
    skipped = [r for r in human if r.status == "invalid"]
    assert {r.cause for r in skipped} == {
        "skipped",
        "unscored: no rating for condition_compliance, ground_truth_consistency",
    }
    assert (study.scores.parent / "human_plan.json").is_file()
    # importing again replaces the human rows instead of duplicating them
    assert _import(study, export, out / "plan.json").returncode == 0
    assert sum(r.kind == "human" for r in read_scores(study.scores)) == 66 * 4

    report = build_report(
        study.scores,
        study.root / "report",
        run_dir=study.run_dir,
        bootstrap=20,
        weight_draws=20,
        html=False,
        print_table=False,
    )
    index = json.loads((report / "paper_tables.json").read_text())
    for n in (18, 19, 20, 21):
        assert "file" in index[f"Table {n}"], index[f"Table {n}"]

    # Table 18: 4 systems x 2 transitions = 8 planned items per track; 2 ratings each, plus
    # annotator 3's skipped and unscored speech evaluations.  A system-track cell holds
    # 2 transitions x 2 ratings = 4 scored evaluations
    t18 = _table(report, "table18_human_counts").set_index("track")
    assert t18.loc["text"].to_dict() == {
        "planned_items": 8, "submitted": 16, "scored": 16, "skipped_or_unscored": 0,
        "rubric_scores": 64, "annotators": 2, "system_track_cells": 4,
        "mean_scored_per_cell": 4.0,
    }  # fmt: skip
    assert t18.loc["speech", "submitted"] == 18 and t18.loc["speech", "scored"] == 16
    assert t18.loc["speech", "skipped_or_unscored"] == 2 and t18.loc["speech", "annotators"] == 3
    assert t18.loc["integrated", "scored"] == 16
    assert t18.loc["total"].to_dict() == {
        "planned_items": 32, "submitted": 66, "scored": 64, "skipped_or_unscored": 2,
        "rubric_scores": 256, "annotators": 3, "system_track_cells": 16,
        "mean_scored_per_cell": 4.0,
    }  # fmt: skip

    # Table 19.  Text: human A..D = 6, 7, 8, 9; judges (jt1 + jt2) / 2 = 5, 6, 8, 7.
    # Ranks 1 2 3 4 vs 1 2 4 3: rho = 1 - 6 * 2 / (4 * 15) = 0.8; tau-b = (5 - 1) / 6;
    # Pearson: sum dx dy = 4, sum dx^2 = sum dy^2 = 5 -> 0.8.
    t19 = _table(report, "table19_human_judge_agreement").set_index("measure")
    text = t19.loc["text"]
    assert text["n_systems"] == 4
    assert text["spearman"] == pytest.approx(0.8)
    assert text["kendall_tau_b"] == pytest.approx(4 / 6)
    assert text["pearson"] == pytest.approx(0.8)
    # dropping either transition leaves every human mean unchanged (the spread cancels)
    assert text["loto_spearman_min"] == pytest.approx(0.8) == text["loto_spearman_max"]
    assert text["spearman_window_judges"] == pytest.approx(0.8)  # judges constant per system
    # image and omni: identical orderings; Pearson 1 (human = judge)
    for track in ("image", "integrated"):
        assert t19.loc[track, "spearman"] == pytest.approx(1.0)
        assert t19.loc[track, "pearson"] == pytest.approx(1.0)
    # composite: human 5.75, 6.25, 7.25, 7.75; judges 5.25, 6, 7.25, 7 -> ranks 1234 vs 1243
    assert t19.loc["composite", "spearman"] == pytest.approx(0.8)
    # each rubric criterion of the text track: the same ratings -> the same rho
    for crit in CRITERIA["text"]:
        assert t19.loc[f"text:{crit}", "spearman"] == pytest.approx(0.8)

    # Table 20: orchestration (A, B) vs any-to-any (C, D)
    t20 = _table(report, "table20_human_paradigm_means").set_index(["measure", "paradigm"])
    assert t20.loc[("text", "orchestration"), "human_mean"] == pytest.approx(6.5)
    assert t20.loc[("text", "orchestration"), "judge_mean"] == pytest.approx(5.5)
    assert t20.loc[("text", "any-to-any"), "human_mean"] == pytest.approx(8.5)
    assert t20.loc[("text", "any-to-any"), "judge_mean"] == pytest.approx(7.5)
    assert t20.loc[("text", "any-to-any"), "human_rank"] == 1
    assert t20.loc[("text", "any-to-any"), "judge_rank"] == 1
    # speech: human 7.5 vs 7.5 (a tie, both rank 1); judges 7 vs 7
    assert t20.loc[("speech", "orchestration"), "human_mean"] == pytest.approx(7.5)

    # Table 21: image ratings are identical between annotators -> alpha = 1 for every criterion.
    # Text, criterion 1, units (system, transition): the first transition gets (H-1, H+1),
    # the second (H, H): alpha computed by hand below.
    t21 = _table(report, "table21_human_window_diagnostics").set_index("track")
    assert t21.loc["image", "alpha_min"] == pytest.approx(1.0)
    assert t21.loc["image", "alpha_max"] == pytest.approx(1.0)
    assert t21.loc["text", "pairable_items"] == 8
    assert t21.loc["text", "alpha_1"] == pytest.approx(_hand_alpha_text())
    assert t21.loc["text", "alpha_min"] == pytest.approx(t21.loc["text", "alpha_max"])
    assert t21.loc["text", "judges_window_vs_full_spearman"] == pytest.approx(1.0)


def _hand_alpha_text() -> float:
    """Ordinal alpha of the text track, by the coincidence-matrix recipe (Krippendorff 2011).

    Units (A..D, first transition): (5,7) (6,8) (7,9) (8,10); second: (6,6) (7,7) (8,8) (9,9).
    Values 5..10; every unit has two values, so each pair adds 1 to o[c,k] and o[k,c].
    n_v: 5:1 6:3 7:4 8:4 9:3 10:1 (n = 16).  Observed disagreement pairs are all (v, v+2).
    Ordinal delta(c, k) = (sum of n_g for g in c..k - (n_c + n_k) / 2)^2.
    """
    n = {5: 1, 6: 3, 7: 4, 8: 4, 9: 3, 10: 1}
    values = sorted(n)

    def delta(c: int, k: int) -> float:
        lo, hi = min(c, k), max(c, k)
        return (sum(n[g] for g in values if lo <= g <= hi) - (n[c] + n[k]) / 2) ** 2

    observed = 2 * sum(delta(v, v + 2) for v in (5, 6, 7, 8))  # o[c,k] + o[k,c]
    expected = sum(n[c] * n[k] * delta(c, k) for c in values for k in values)
    total = sum(n.values())
    return 1 - (total - 1) * observed / expected


def test_hand_alpha_of_the_text_track() -> None:
    # delta: (5,7) = (1+3+4 - 5/2)^2 = 121/4, (6,8) = (3+4+4 - 7/2)^2 = 225/4, (7,9) = 225/4,
    # (8,10) = 121/4 -> observed sum 2 * 346/2 = 346; expected sum over all value pairs 10432;
    # alpha = 1 - 15 * 346 / 10432 = 2621/5216
    assert _hand_alpha_text() == pytest.approx(2621 / 5216)
