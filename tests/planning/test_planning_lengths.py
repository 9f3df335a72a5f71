"""Narration length report of a run (vs. the paper's ~107-character references)."""

from __future__ import annotations

import json

import pytest

from omnistory_core.kit.planning.lengths import (
    job_dirs,
    length_summary,
    main,
    narration_lengths,
)


def _job(tmp_path, name, narrations):
    job = tmp_path / name
    job.mkdir(parents=True)
    rows = [
        {"index": i, "plan": {"narration": n} if n is not None else None}
        for i, n in enumerate(narrations)
    ]
    (job / "plans.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return job


def test_lengths_and_summary(tmp_path):
    job = _job(tmp_path, "a", ["x" * 100, None, "  " + "y" * 214 + " "])
    assert narration_lengths(job) == [100, 214]
    summary = length_summary([100, 214])
    assert summary == {
        "n": 2,
        "mean": 157.0,
        "median": 157.0,
        "min": 100,
        "max": 214,
        "reference_mean": 107,
        "ratio_to_reference": pytest.approx(1.467),
    }
    assert length_summary([])["mean"] is None


def test_bad_row_names_file_and_line(tmp_path):
    job = tmp_path / "bad"
    job.mkdir()
    (job / "plans.jsonl").write_text('{"plan": null}\nnot json\n')
    with pytest.raises(ValueError, match=r"plans.jsonl:2"):
        narration_lengths(job)


def test_cli_over_a_sweep(tmp_path, capsys):
    _job(tmp_path, "sweep/gpt-copy-espeak", ["a" * 220])
    _job(tmp_path, "sweep/claude-copy-espeak", ["b" * 110, "c" * 90])
    assert len(job_dirs(tmp_path / "sweep")) == 2
    assert main([str(tmp_path / "sweep")]) == 0
    out = capsys.readouterr().out
    assert "claude-copy-espeak" in out and " 100.0 " in out and " 220.0 " in out
    assert main([str(tmp_path / "empty")]) == 1
