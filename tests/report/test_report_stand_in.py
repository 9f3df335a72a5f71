"""The stand-in leaderboard: real-weight metric rows get a table of their own, named with their
backends, in the terminal, ``index.html`` and ``stand_in_leaderboard.csv``; the paper
leaderboard is unchanged by them."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd
import pytest
from omnistory_report.analysis.frame import frame_from_rows
from omnistory_report.analysis.stand_in import (
    NOT_SCORED,
    TITLE,
    stand_in_columns,
    stand_in_leaderboard,
)
from omnistory_report.command import build_report

from omnistory_core.scores import ScoreRow, write_scores

BACKENDS = {
    "bertscore_minilm": ("MiniLM-L6 layer 6", "bertscore"),
    "speech_meta_fw_pya": (
        {"asr": "faster-whisper base", "gender": "pyAudioAnalysis"},
        "speech_meta",
    ),
}


def describe(name: str):
    return BACKENDS.get(name, (None, None))


def _rows() -> list[ScoreRow]:
    """Two examples, three systems: the oracle best, noop missing its outputs, one error."""
    rows: list[ScoreRow] = []
    values = {"oracle": (1.0, 0.8), "real": (0.6, 0.2)}
    for system, (a, b) in values.items():
        for ex, v in (("e1", a), ("e2", b)):
            rows.append(ScoreRow(system, ex, "metric", "text", "bertscore_minilm", "f1", v, "ok"))
            rows.append(ScoreRow(system, ex, "metric", "text", "bertscore", "f1", v / 2, "ok"))
            rows.append(
                ScoreRow(system, ex, "metric", "speech", "speech_meta_fw_pya", "speed", 1.0, "ok")
            )
            rows.append(
                ScoreRow(system, ex, "metric", "speech", "speech_meta_fw_pya", "gender", v, "ok")
            )
    for ex in ("e1", "e2"):
        for ev, crit, track in (
            ("bertscore_minilm", "f1", "text"),
            ("bertscore", "f1", "text"),
            ("speech_meta_fw_pya", "speed", "speech"),
            ("speech_meta_fw_pya", "gender", "speech"),
        ):
            rows.append(ScoreRow("noop", ex, "metric", track, ev, crit, None, "missing_output"))
    # the real system's second gender row could not be computed: out of both denominators
    rows = [
        r
        for r in rows
        if not (r.system == "real" and r.example_id == "e2" and r.criterion == "gender")
    ]
    rows.append(
        ScoreRow("real", "e2", "metric", "speech", "speech_meta_fw_pya", "gender", None, "error")
    )
    return rows


def test_columns_name_backends_and_the_unscored_criterion() -> None:
    columns = stand_in_columns(frame_from_rows(_rows()), describe)
    by_key = {(c.evaluator, c.criterion): c for c in columns}
    # the paper's own bertscore is not a stand-in column
    assert ("bertscore", "f1") not in by_key
    assert by_key[("bertscore_minilm", "f1")].backend == "MiniLM-L6 layer 6"
    # speed is decided by the ASR's word timestamps: the mapping's "asr" entry
    assert by_key[("speech_meta_fw_pya", "speed")].backend == "faster-whisper base"
    assert by_key[("speech_meta_fw_pya", "gender")].backend == "pyAudioAnalysis"
    assert by_key[("speech_meta_fw_pya", "emotion")].scored is False
    assert by_key[("speech_meta_fw_pya", "pitch")].scored is False
    assert "MiniLM-L6 layer 6" in by_key[("bertscore_minilm", "f1")].label


def test_valid_only_and_zero_filled_means() -> None:
    table, columns = stand_in_leaderboard(frame_from_rows(_rows()), describe)
    label = {(c.evaluator, c.criterion): c.label for c in columns}
    rows = table.set_index("system")
    f1 = label[("bertscore_minilm", "f1")]
    gender = label[("speech_meta_fw_pya", "gender")]
    assert rows.loc["oracle", f1] == pytest.approx(0.9)
    assert rows.loc["real", f1] == pytest.approx(0.4)
    # noop: no valid example (undefined valid-only), zero under zero-filled
    assert math.isnan(rows.loc["noop", f1])
    assert rows.loc["noop", f"{f1} (0)"] == 0.0
    # the error row is in neither denominator: one valid example of 0.6
    assert rows.loc["real", gender] == pytest.approx(0.6)
    assert rows.loc["real", f"{gender} (0)"] == pytest.approx(0.6)
    assert rows.loc["oracle", label[("speech_meta_fw_pya", "emotion")]] == NOT_SCORED
    assert list(table["system"]) == ["oracle", "real", "noop"]


def test_no_stand_in_rows_no_table() -> None:
    rows = [r for r in _rows() if r.evaluator == "bertscore"]
    table, columns = stand_in_leaderboard(frame_from_rows(rows), describe)
    assert table.empty and columns == []


def test_report_prints_and_writes_the_stand_in_table(tmp_path: Path) -> None:
    from rich.console import Console

    scores = tmp_path / "scores.jsonl"
    write_scores(scores, _rows())
    console = Console(file=io.StringIO(), width=250)
    out = build_report(scores, tmp_path / "report", bootstrap=20, weight_draws=20, console=console)
    printed = console.file.getvalue()
    assert TITLE in printed
    assert "bertscore_minilm/f1" in printed and NOT_SCORED in printed
    # the registered metric's own backend (omnistory-eval is installed with the report)
    assert "all-MiniLM-L6-v2" in printed
    csv = pd.read_csv(out / "stand_in_leaderboard.csv")
    assert list(csv["system"]) == ["oracle", "real", "noop"]
    html = (out / "index.html").read_text(encoding="utf-8")
    assert TITLE.replace("'", "&#x27;") in html
    assert 'id="standin"' in html
    # the paper leaderboard holds only the paper bertscore (half the stand-in's values)
    lb = pd.read_csv(out / "leaderboard.csv").set_index("system")
    assert lb.loc["oracle", "bertscore"] == pytest.approx(0.45)
