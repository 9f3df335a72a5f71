"""`python -m omnistory_core backbone=qwen25omni image=copy` on the tiny checkpoint (transformers).

The real CLI in a subprocess: Hydra finds the plugin's yaml, the engine derives the T+S system,
the backbone loads through its own ``load()`` and writes one record per example; narration,
speech (24 kHz WAV) and the plan's image prompt land in the official candidate layout.
"""

from __future__ import annotations

import json

import soundfile as sf
from omnistory_testkit import run_cli
from qwen25omni_tiny import IMAGE_PROMPT, NARRATION, QUOTE


def test_cli_transformers_backend_on_the_demo(tiny_qwen25omni, tmp_path):
    out = tmp_path / "out"
    proc = run_cli(
        "backbone=qwen25omni",
        "image=copy",
        "dataset.limit=2",
        "backbone.talker_max_new_tokens=12",
        "backbone.device=cpu",
        f"output_root={out}",
        "engine.progress=false",
        cwd=str(tmp_path),
        env={"OMNISTORY_MODEL_BACKBONE_QWEN25OMNI": str(tiny_qwen25omni), "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = out / "runs" / "demo" / "qwen25omni-copy"
    rows = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert [[r[m]["status"] for m in ("text", "image", "speech")] for r in rows] == [["ok"] * 3] * 2
    for i in (0, 1):
        assert (run / "text" / str(i) / "generated.txt").read_text() == NARRATION
        data, rate = sf.read(run / "speech" / str(i) / "generated.wav")
        assert rate == 24000 and len(data) > 0
        assert (run / "image" / str(i) / "generated.png").is_file()
    plans = [json.loads(line) for line in (run / "plans.jsonl").read_text().splitlines()]
    assert [json.loads(p["raw"]) for p in plans] == [{"image_prompt": IMAGE_PROMPT}] * 2
    assert all(p["usage"]["quote"] == QUOTE and p["usage"]["passes"] == 2 for p in plans)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["paradigm"] == "semi-orchestration (T+S)"
    assert manifest["missing"] == {"text": 0, "image": 0, "speech": 0}
    params = manifest["components"]["backbone"]["params"]
    assert params["model"] == str(tiny_qwen25omni) and "device" not in params
    assert (run / "missing.txt").read_text().strip() == ""
