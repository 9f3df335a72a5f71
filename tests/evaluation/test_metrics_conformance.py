"""A built-in metric with a real loader through ``check_component``: CLIP on a tiny random
checkpoint scores a built-in run of the demo through the evaluation runner (an unreadable
generated image included)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from omnistory_eval.metrics.clip import CLIPMetric  # noqa: E402
from omnistory_testkit import check_component  # noqa: E402
from omnistory_testkit.checkpoints import OFFLINE_ENV  # noqa: E402
from omnistory_testkit.metric_checkpoints import build_tiny_clip  # noqa: E402


def test_clip_keeps_the_evaluator_contract(tmp_path, monkeypatch) -> None:
    for key, value in OFFLINE_ENV.items():
        monkeypatch.setenv(key, value)
    checkpoint = build_tiny_clip(tmp_path / "clip")
    # cosine similarity of unit embeddings
    report = check_component(CLIPMetric, model=str(checkpoint), device="cpu", score_range=(-1, 1))
    print(report)
    assert report.passed[:5] == ["identity", "reads", "light_import", "outputs", "cache"]
    keyed = next(c for c in report.passed if c.startswith("output_params ("))
    assert "model" in keyed and "device" not in keyed, keyed
    assert report.passed[-3:] == [
        "deterministic",
        "failures (through run_batch)",
        "unreadable_input (candidate_image)",
    ]
    assert any(check.startswith("runtime_params (") for check in report.passed), str(report)
    assert report.skipped == {}, report.skipped
