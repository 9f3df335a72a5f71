"""`python -m omnistory_core backbone=hyperclova` end to end against the OmniServe stand-in."""

from __future__ import annotations

import io
import json
from pathlib import Path

import soundfile as sf
from hcx_fake_omniserve import FakeOmniServe
from omnistory_testkit import demo_planner_items, files_containing, run_cli
from PIL import Image

KEY_VAR = "HCX_CLI_CANARY"  # not secret-looking: no scrubber can hide a leak
KEY = "hcx-canary-cli-7f6e5d4c3b"


def test_cli_writes_three_modalities_per_modality_failure_and_never_the_key(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    second_page = demo_planner_items(2)[1]["current_text"]
    args = (
        "backbone=hyperclova",
        "dataset.limit=2",
        f"output_root={out}",
        "engine.progress=false",
        f"backbone.api_key_env={KEY_VAR}",
        "backbone.image_attempts=2",
        "backbone.image_retry_delay_s=0.01",
        "backbone.max_concurrency=2",
    )
    with FakeOmniServe() as srv:
        # example 1's signed image URL answers 403, like an expired one
        srv.forbid_when["image"] = second_page[:40]
        proc = run_cli(
            *args, f"backbone.base_url={srv.base_url}", cwd=str(tmp_path), env={KEY_VAR: KEY}
        )
        first_run = list(srv.requests)
        rerun = run_cli(
            *args, f"backbone.base_url={srv.base_url}", cwd=str(tmp_path), env={KEY_VAR: KEY}
        )
        second_run = srv.requests[len(first_run) :]
        cached = run_cli(
            *args,
            f"backbone.base_url={srv.base_url}",
            "engine.retry_failures=none",
            cwd=str(tmp_path),
            env={KEY_VAR: KEY},
        )
        third_run = srv.requests[len(first_run) + len(second_run) :]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert cached.returncode == 0, cached.stderr[-3000:]
    # text x2, image 1 + 2 attempts, speech x2
    assert sorted(r.kind for r in first_run) == ["image"] * 3 + ["speech"] * 2 + ["text"] * 2
    # the re-run recomputes example 1 only: its image failed with a model_error, which the
    # default engine.retry_failures=errors retries; with =none everything comes from the store
    assert sorted(r.kind for r in second_run) == ["image"] * 2 + ["speech", "text"]
    assert third_run == []
    assert {r.headers["authorization"] for r in first_run} == {f"Bearer {KEY}"}

    job = out / "runs" / "demo" / "hyperclova"
    for i in (0, 1):
        assert (
            job / "text" / str(i) / "generated.txt"
        ).read_text().strip() == "Pip tapped on the glass again."
        samples, rate = sf.read(
            io.BytesIO((job / "speech" / str(i) / "generated.wav").read_bytes())
        )
        assert rate == 16000 and len(samples) == 3200
    assert Image.open(job / "image" / "0" / "generated.png").size == (12, 12)
    assert not (job / "image" / "1" / "generated.png").exists()

    missing = (job / "missing.txt").read_text().splitlines()
    assert len(missing) == 1
    index, modality, category, message = missing[0].split("\t")
    assert (index, modality, category) == ("1", "image", "model_error")
    assert message.startswith("image failed after 2 attempts: image download from")
    assert "HTTP 403 Forbidden" in message
    records = [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines()]
    assert [r["image"]["status"] for r in records] == ["ok", "failure"]
    assert all(r["text"]["status"] == r["speech"]["status"] == "ok" for r in records)

    manifest = json.loads((job / "manifest.json").read_text())
    assert manifest["usage"]["backbone"]["requests"] == 7
    assert manifest["config"]["backbone"]["api_key_env"] == KEY_VAR

    assert files_containing(str(out), KEY) == []
    assert files_containing(str(out), "X-Amz-Signature") == []  # signed URLs stay out of logs
    for p in (proc, rerun):
        assert KEY not in p.stdout + p.stderr and "X-Amz-Signature" not in p.stdout + p.stderr
