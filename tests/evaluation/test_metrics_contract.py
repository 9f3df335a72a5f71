"""The metric components against the evaluator contract, and their shipped yaml configs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omnistory_eval.metrics import METRICS

from omnistory_core.builtin.omnistorybench import OMNISTORYBENCH
from omnistory_core.components import EVALUATION_INPUTS, Metric

EVAL_CONF = Path(__file__).resolve().parents[2] / "plugins/omnistory-eval/src/omnistory_eval/conf"
CONF = EVAL_CONF / "metric"
EXPECTED = {
    "bertscore": ("text", ("f1",)),
    "clip": ("image", ("cosine",)),
    "speech_meta": ("speech", ("emotion", "speed", "pitch", "gender")),
}


@pytest.mark.parametrize("cls", METRICS, ids=lambda c: c.name)
def test_metric_declares_the_contract(cls):
    assert issubclass(cls, Metric) and cls.kind == "metric"
    assert (cls.track, cls.criteria) == EXPECTED[cls.name]
    assert cls.track in OMNISTORYBENCH.track_names
    assert set(cls.reads) <= set(EVALUATION_INPUTS)
    assert not cls.oracle  # metrics read references as evaluators, not as generation components
    assert cls.version and cls.checkpoints({})


@pytest.mark.parametrize("cls", METRICS, ids=lambda c: c.name)
def test_shipped_yaml_matches_the_class(cls):
    spec = yaml.safe_load((CONF / f"{cls.name}.yaml").read_text(encoding="utf-8"))
    assert spec.pop("name") == cls.name
    from_yaml = cls(**spec)
    defaults = cls()
    # the yaml spells out the defaults: same cache identity as a bare instance
    assert from_yaml.output_params() == defaults.output_params()
    json.dumps(from_yaml.output_params())  # cache keys hash JSON
    assert from_yaml.batch_size == spec["batch_size"]


def test_importing_the_metrics_loads_no_heavy_stack():
    code = (
        "import sys, omnistory_eval.metrics, omnistory_eval.speech_analysis;"
        "print([m for m in ('torch', 'transformers', 'librosa', 'bert_score', 'numpy')"
        " if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
