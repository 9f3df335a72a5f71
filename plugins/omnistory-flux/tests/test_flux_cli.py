"""The user's command line, end to end, with the experts pointed at tiny local checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PIL import Image


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "omnistory_core", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def run_dir(root: Path, system_id: str) -> Path:
    return root / "runs" / "demo" / system_id


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "records.jsonl").read_text().splitlines()]


def test_cli_runs_dev_then_serves_it_from_the_cache(tiny_dev, tmp_path):
    out = tmp_path / "out"
    args = (
        "image=dev",
        f"image.model={tiny_dev}",
        "image.height=64",
        "image.width=64",
        "image.steps=2",
        "dataset.limit=2",
        f"output_root={out}",
    )
    first = run_cli(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    run = run_dir(out, "template-dev-espeak")
    rows = records(run)
    assert [r["image"]["status"] for r in rows] == ["ok", "ok"]
    for row in rows:
        with Image.open(run / row["image"]["path"]) as image:
            assert image.size == (64, 64)
    manifest = json.loads((run / "manifest.json").read_text())
    image = manifest["components"]["image"]
    assert image["name"] == "dev" and image["distribution"] == "omnistory-flux"
    assert image["params"]["model"] == str(tiny_dev) and image["params"]["steps"] == 2
    stats = json.loads((run / "stats.json").read_text())["components"]["image/dev"]
    assert (stats["calls"], stats["failures"], stats["loads"]) == (2, 0, 1)

    second = run_cli(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    stats = json.loads((run / "stats.json").read_text())["components"]["image/dev"]
    assert (stats["calls"], stats["cache_hits"], stats["loads"]) == (0, 2, 0)


def test_cli_runs_kontext_on_the_demo_pages(tiny_kontext, tmp_path):
    out = tmp_path / "out"
    result = run_cli(
        "image=kontext",
        f"image.model={tiny_kontext}",
        "image.height=64",
        "image.width=64",
        "image.steps=2",
        "image.auto_resize=false",
        "dataset.limit=2",
        f"output_root={out}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run = run_dir(out, "template-kontext-espeak")
    assert [r["image"]["status"] for r in records(run)] == ["ok", "ok"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["components"]["image"]["reads"] == ["image_prompt", "current_image"]


def test_cli_bad_parameter_fails_before_any_work_naming_the_parameter(tmp_path):
    result = run_cli(
        "image=dev",
        "image.steps=0",
        "dataset.limit=1",
        f"output_root={tmp_path / 'out'}",
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "image=dev: steps must be >= 1, got 0" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out" / "store").exists()
