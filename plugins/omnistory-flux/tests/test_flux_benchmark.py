"""benchmarks/flux_throughput.py: refuses to run without CUDA; its code path runs on a toy model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "flux_throughput.py"
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="benchmarks/ is not in this checkout")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def test_without_cuda_it_exits_with_a_clear_message():
    result = run(env={"CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2
    assert "no CUDA device is visible" in result.stderr and "measured nothing" in result.stderr


def test_tiny_smoke_run_writes_its_report(tmp_path):
    out = tmp_path / "bench.json"
    result = run(
        "--tiny",
        "--allow-cpu",
        "--images",
        "2",
        "--batch-sizes",
        "1,2",
        "--steps",
        "2",
        "--size",
        "64",
        "--json",
        str(out),
        env={"CUDA_VISIBLE_DEVICES": ""},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(out.read_text())
    assert [r["batch_size"] for r in report["results"]] == [1, 2]
    assert all(r["failures"] == 0 and r["images_per_s"] > 0 for r in report["results"])
    assert report["model"].endswith("(tiny)")


@pytest.mark.gpu
def test_full_size_throughput_on_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("full-size FLUX.1-dev timing needs a CUDA GPU (about 40 GB in bf16)")
    out = tmp_path / "bench.json"
    result = run("--images", "4", "--batch-sizes", "1,4", "--json", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads(out.read_text())["results"]
    assert all(r["failures"] == 0 for r in rows)


def test_full_size_configuration_matches_flux1_dev_parameter_counts():
    """Built on the meta device (no memory): the timed pipeline has FLUX.1-dev's component sizes
    (11.9B transformer, 4.76B T5-XXL encoder, 123M CLIP-L text encoder, 84M VAE)."""
    import torch
    from omnistory_flux.random_pipeline import random_flux_pipeline

    pipe = random_flux_pipeline("dev", "full", device="meta", dtype=torch.bfloat16)
    counts = {
        name: sum(p.numel() for p in getattr(pipe, name).parameters())
        for name in ("transformer", "text_encoder_2", "text_encoder", "vae")
    }
    assert round(counts["transformer"] / 1e9, 2) == 11.90
    assert round(counts["text_encoder_2"] / 1e9, 2) == 4.76
    assert round(counts["text_encoder"] / 1e6) == 123
    assert round(counts["vae"] / 1e6) == 84
    assert pipe.vae_scale_factor == 8 and pipe.transformer.dtype == torch.bfloat16
