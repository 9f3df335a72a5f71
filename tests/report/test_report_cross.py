"""The hosted image experts on both benchmarks through the real command line, against the test
kit's local image server, with stand-in evaluators: an Omni-StoryBench sweep over
image=nanobanana,seedream,gpt_image is planned and priced, then runs and is scored; the same
experts run and are scored on ViStoryBench; ``report --cross`` on the two sweeps writes the
side-by-side table and figure, with the published rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from omnistory_testkit import run_cli
from omnistory_testkit.image_servers import ImageServer
from omnistory_testkit.standins import make_standin_site

pytest.importorskip("omnistory_gemini_image", reason="needs plugins/omnistory-gemini-image")
pytest.importorskip("omnistory_seedream", reason="needs plugins/omnistory-seedream")
pytest.importorskip("omnistory_vistorybench", reason="needs plugins/omnistory-vistorybench")

HOSTED = ("image/nanobanana", "image/seedream", "image/gpt_image")
PRICES = (
    "image.prices={gemini-3-pro-image-preview: {input_per_mtok: 2.0, output_per_mtok: 120.0},"
    " doubao-seedream-4-0-250828: {per_image: 0.03},"
    " gpt-image-1.5: {input_per_mtok: 5.0, output_per_mtok: 40.0}}"
)


def sweep(cwd: Path, env: dict[str, str], *args: str) -> None:
    done = run_cli("-m", "engine.progress=false", *args, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr[-3000:]


def test_both_benchmarks_then_the_cross_view(tmp_path: Path) -> None:
    site = make_standin_site(tmp_path / "site", evaluators=True, keep=HOSTED)
    env = {"PYTHONPATH": str(site), "OMNI_CROSS_KEY": "sk-local-cross-canary"}
    with ImageServer() as server:
        common = (
            "image=nanobanana,seedream,gpt_image",
            f"image.base_url={server.openai_base_url}",
            "image.api_key_env=OMNI_CROSS_KEY",
        )
        osb = ("planner=template", "tts=noop", "dataset.limit=2", *common)
        sweep(tmp_path, env, *osb, "engine.dry_run=true", PRICES, "sweep_name=osb")
        plan = json.loads((tmp_path / "outputs/sweeps/osb/sweep_plan.json").read_text())
        assert server.recorded == []
        for key in HOSTED:  # each priced in its provider's unit, 2 calls each
            row = plan["components"][key]
            assert row["calls"] == 2 and row["est_cost_usd"] > 0, (key, row)
        assert plan["components"]["image/seedream"]["est_cost_usd"] == pytest.approx(0.06)
        sweep(tmp_path, env, *osb, "evaluation.metrics=[clip]", "sweep_name=osb")
        vsb = ("task=vistorybench", "dataset=vistory_fixture", *common)
        metrics = "evaluation.metrics=[cids,csd,aesthetic,diversity,prompt_align]"
        sweep(tmp_path, env, *vsb, metrics, "sweep_name=vsb")
        assert {r.route for r in server.recorded} == {"gemini", "images", "edits"}
    runs = tmp_path / "outputs" / "sweeps"
    osb_scores = (runs / "osb" / "scores.jsonl").read_text().splitlines()
    assert {json.loads(x)["system"] for x in osb_scores} == {
        "template-nanobanana-noop",
        "template-seedream-noop",
        "template-gpt_image-noop",
    }
    manifest = json.loads((runs / "osb" / "template-seedream-noop" / "manifest.json").read_text())
    assert manifest["usage"]["image"]["images"] == 2  # the image stage's usage, per call

    from omnistory_report.command import main

    out = tmp_path / "x"
    assert main(["--cross", str(runs / "osb"), str(runs / "vsb"), "--out", str(out)]) == 0
    with open(out / "cross.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    ours = {r["plugin"]: r for r in rows if r["source"] == "ours"}
    assert set(ours) == set(HOSTED)
    for row in ours.values():  # both benchmarks' numbers side by side
        assert float(row["osb_clip.cosine"]) >= 0
        assert row["vsb_overall_rank"] and float(row["vsb_prompt_align_avg"]) >= 0
    published = {(r["plugin"], r["vsb_published"]) for r in rows if r["source"] == "published"}
    assert ("image/seedream", "Seedream4/base") in published
    assert ("image/nanobanana", "NanoBanana/Gemini3ProImagePreview") in published
    assert ("image/gpt_image", "GPT4o/Base") in published
    figure = (out / "cross.png").read_bytes()
    assert figure.startswith(b"\x89PNG") and len(figure) > 1000
    assert "image/seedream" in (out / "cross.md").read_text()


def test_runs_of_one_benchmark_are_refused_in_one_line(tmp_path: Path, capsys) -> None:
    from omnistory_report.command import main

    job = tmp_path / "run" / "job"
    job.mkdir(parents=True)
    (job / "manifest.json").write_text(json.dumps({"system_id": "x", "components": {}}))
    assert main(["--cross", str(tmp_path / "run"), "--out", str(tmp_path / "x")]) == 2
    assert "needs scored runs of both" in capsys.readouterr().err


def test_published_rows_of_both_benchmarks() -> None:
    from omnistory_report.cross import osb_published, vsb_published

    kontext = osb_published("image/kontext")
    assert kontext is not None and kontext["osb_published_rows"] == 10
    assert {r["vsb_published"] for r in vsb_published("image/nanobanana")} == {
        "NanoBanana/Gemini2.5FlashImagePreview",
        "NanoBanana/Gemini3ProImagePreview",
        "Gemini/Base",
    }
