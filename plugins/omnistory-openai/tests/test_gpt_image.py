"""image=gpt_image through the real OpenAI SDK against the test kit's local images server: the
edits request of each ViStoryBench shot (every input image in order: 0, 1 and 3 onstage
characters, the chained second shot), the nearest landscape size, retries, a moderation refusal,
re-runs from the store, the dry run's token price, and the Omni-StoryBench contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from omnistory_openai.image import GPTImage
from omnistory_testkit import check_component
from omnistory_testkit.image_servers import ImageReply, ImageServer
from omnistory_testkit.runs import run_task_job
from omnistory_vistorybench.dataset import fixture_root, load_stories, shot_records

from omnistory_core.kit.hosted_images import jpeg_bytes

KEY = "OMNI_GPT_IMAGE_TEST_KEY"
SHOTS = [1, 2, 3, 4, 5, 7]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "sk-local-gpt-image-canary")


def job(tmp: Path, server: ImageServer, *extra: str) -> Any:
    return run_task_job(
        tmp / "job",
        "system=gpt4o",
        "dataset=vistory_fixture",
        f"image.base_url={server.openai_base_url}",
        f"image.api_key_env={KEY}",
        "image.retry_base_delay_s=0.01",
        "engine.progress=false",
        f"engine.store={tmp / 'store'}",
        *extra,
    )


def records() -> dict[int, Any]:
    stories = load_stories(fixture_root(), split="lite", language="en")
    return {r.shot_index: r for r in shot_records(stories)}


def test_each_shot_sends_every_input_image_in_order_chained_on_the_previous(
    tmp_path: Path,
) -> None:
    shots = records()
    with ImageServer() as server:
        server.script("edits", ImageReply.rate_limited("0"))  # the first edit: 429, then ok
        manifest = job(tmp_path, server)
        generations = server.requests_for("images")
        edits = server.requests_for("edits")
        answers = list(server.images)
    # shot 1 has no character and no previous shot: a generation; every later shot: an edit
    [first] = generations
    assert first.body == {
        "model": "gpt-image-1.5",
        "prompt": shots[1].prompt,
        "size": "1536x1024",
        "n": 1,
    }
    assert len(edits) == len(SHOTS) and edits[0].files == edits[1].files  # the retried one
    for index, request in zip(SHOTS[1:], edits[1:], strict=True):
        assert request.headers["authorization"] == "Bearer sk-local-gpt-image-canary"
        assert request.fields == {
            "model": "gpt-image-1.5",
            "prompt": shots[index].prompt,
            "size": "1536x1024",
            "n": "1",
        }
        refs = [jpeg_bytes(Path(p).read_bytes(), 95) for p in shots[index].reference_images]
        previous = jpeg_bytes(answers[SHOTS.index(index) - 1], 95)
        assert [f[0] for f in request.files] == ["image[]"] * (len(refs) + 1)
        assert [f[2] for f in request.files] == ["image/jpeg"] * (len(refs) + 1)
        assert [f[3] for f in request.files] == [*refs, previous]
    assert [len(shots[i].reference_images) for i in (1, 2, 4)] == [0, 1, 3]
    layout = manifest["layout"]
    assert (layout["method"], layout["mode"]) == ("GPT4o", "Base")
    assert manifest["usage"]["image"]["images"] == len(SHOTS)
    with ImageServer() as server:
        again = job(tmp_path, server)
        assert server.recorded == []
    assert again["stats"]["image/gpt_image"]["calls"] == 0


def test_a_moderation_refusal_is_the_shots_failure(tmp_path: Path) -> None:
    refusal = ImageReply(status=400, code="moderation_blocked", message="Request rejected")
    with ImageServer() as server:
        server.script("edits", refusal)  # shot 2, the first edit
        job(tmp_path, server)
        assert len(server.requests_for("edits")) == len(SHOTS) - 1  # never retried
    rows = [json.loads(x) for x in (tmp_path / "job" / "records.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r["status"] != "ok"]
    assert [(r["shot_index"], r["category"]) for r in failed] == [(2, "refused")]
    assert "moderation_blocked" in failed[0]["message"]
    assert "Request rejected" in failed[0]["message"]


def test_the_dry_run_prices_its_tokens(tmp_path: Path) -> None:
    with ImageServer() as server:
        plan = job(
            tmp_path,
            server,
            "engine.dry_run=true",
            "image.prices={gpt-image-1.5: {input_per_mtok: 5.0, output_per_mtok: 40.0}}",
        )
        assert server.recorded == []
    row = plan["components"]["image/gpt_image"]
    # quality unset: each landscape image estimated at the high quality's 6208 tokens
    assert row["est_output_tokens"] == 6208 * len(SHOTS)
    expected = (row["est_input_tokens"] * 5.0 + row["est_output_tokens"] * 40.0) / 1e6
    assert row["est_cost_usd"] == pytest.approx(expected)


def test_on_omnistorybench_it_keeps_the_component_contract() -> None:
    with ImageServer() as server:
        report = check_component(
            GPTImage,
            base_url=server.openai_base_url,
            api_key_env=KEY,
            vary={"quality": "low", "size": "1024x1024"},
        )
        edits = server.requests_for("edits")
    assert {"outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert len(edits[0].files) == 1  # the current page
