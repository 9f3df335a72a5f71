"""image=gpt_image with image.batch=true: OpenAI's Batch API on the Images endpoints through the
real SDK against the test kit's local batch server (files, batches, polls, output and error
files): each line is the synchronous request in the JSON form of the endpoint, per-request errors
(a moderation refusal, a transient error), the batch price, and a re-run without calls."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from omnistory_openai.image import GPTImage
from omnistory_openai.image_batch import EDITS, GENERATIONS
from omnistory_testkit.image_batch_server import ImageBatchServer
from omnistory_testkit.image_servers import ImageReply, png_bytes
from omnistory_testkit.runs import run_task_job
from omnistory_vistorybench.dataset import fixture_root, load_stories, shot_records

from omnistory_core.api import ImageOutput
from omnistory_core.kit.batches import BATCH_DISCOUNT
from omnistory_core.kit.hosted_images import DrawRequest, jpeg_bytes

KEY = "OMNI_GPT_IMAGE_BATCH_KEY"
MODEL = "gpt-image-1.5"
PRICES = {MODEL: {"input_per_mtok": 5.0, "output_per_mtok": 40.0}}
FULL_COST = (600 * 5.0 + 1290 * 40.0) / 1e6  # the local server's usage per answer
SHOTS = [1, 2, 3, 4, 5, 7]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "sk-local-gpt-image-batch")


def data_url_bytes(item: dict[str, str]) -> bytes:
    head, _, data = item["image_url"].partition(",")
    assert head == "data:image/jpeg;base64"
    return base64.b64decode(data)


def test_a_batch_line_is_the_synchronous_request_in_json_form() -> None:
    refs = [png_bytes(40, 30, (200, 10 * n, 30)) for n in range(3)]
    edit = DrawRequest(
        "Two friends at the gate.", tuple(refs), previous=png_bytes(48, 27, (9, 9, 9))
    )
    generation = DrawRequest("An empty street at dawn.")
    with ImageBatchServer() as server:
        plain = GPTImage(base_url=server.openai_base_url, api_key_env=KEY, quality="high")
        for request in (edit, generation):
            plain.send(plain.client, request)
        [sync_edit] = server.requests_for("edits")
        [sync_generation] = server.requests_for("images")
        batched = GPTImage(
            base_url=server.openai_base_url,
            api_key_env=KEY,
            quality="high",
            batch=True,
            batch_poll_s=0.01,
        )
        drawn = batched.batch_drawer().draw([edit, generation])
        jobs = {job.target: job for job in server.jobs.values()}
        assert len(server.requests_for("edits")) == 1  # the batch sent nothing synchronously
    assert all(isinstance(d.result, ImageOutput) and d.result.usage["batch"] for d in drawn)
    # one batch per endpoint; the generation is exactly the synchronous JSON body
    assert sorted(jobs) == [EDITS, GENERATIONS]
    [(_, gen_line)] = jobs[GENERATIONS].lines
    assert gen_line == sync_generation.body
    # the edit: the same fields, and the same JPEG bytes in the same order as data URLs
    [(_, edit_line)] = jobs[EDITS].lines
    fields = sync_edit.fields
    assert {k: str(v) for k, v in edit_line.items() if k != "images"} == fields
    assert [data_url_bytes(i) for i in edit_line["images"]] == [f[3] for f in sync_edit.files]
    assert [f[3] for f in sync_edit.files] == [jpeg_bytes(p) for p in (*refs, edit.previous)]
    # the dry run prices a batch at the batch discount
    pricing = GPTImage(prices=PRICES).pricing()
    full = GPTImage(prices=PRICES).estimate({"image_prompt": "x"}, pricing, None)
    half = GPTImage(prices=PRICES, batch=True).estimate({"image_prompt": "x"}, pricing, None)
    assert half["batch"] is True and half["cost_usd"] == pytest.approx(
        BATCH_DISCOUNT * full["cost_usd"]
    )


def _rows(job_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (job_dir / "records.jsonl").read_text().splitlines()]


def test_a_vistorybench_batch_job_with_a_refused_and_an_errored_shot(tmp_path: Path) -> None:
    args = (
        "system=gpt4o",
        "dataset=vistory_fixture",
        f"image.api_key_env={KEY}",
        "image.batch=true",
        "image.batch_poll_s=0.01",
        "image.retry_base_delay_s=0.01",
        f"image.prices={{{MODEL}: {{input_per_mtok: 5.0, output_per_mtok: 40.0}}}}",
        "engine.progress=false",
        f"engine.store={tmp_path / 'store'}",
    )
    [story] = load_stories(fixture_root(), split="lite", language="en")
    records = shot_records([story])
    with ImageBatchServer() as server:
        # the edits of shots 2, 3 and 4, in order: ok, refused, a transient error
        server.script(
            "edits",
            ImageReply(),
            ImageReply(status=400, code="moderation_blocked", message="blocked"),
            ImageReply(status=500, message="server error"),
        )
        manifest = run_task_job(tmp_path / "job", f"image.base_url={server.openai_base_url}", *args)
        jobs = list(server.jobs.values())
        [fallback] = server.requests_for("edits")  # shot 4, the synchronous way
        answers = list(server.images)
        creates = server.requests_for("batches")
    assert [j.target for j in jobs] == [GENERATIONS] + [EDITS] * 5  # one batch per shot
    assert all(c.headers["authorization"] == "Bearer sk-local-gpt-image-batch" for c in creates)
    lines = [job.lines[0][1] for job in jobs]
    assert "images" not in lines[0] and lines[0]["prompt"] == records[0].prompt
    assert lines[0]["size"] == "1536x1024" and lines[0]["model"] == MODEL
    # shot 2: its character's first reference, then shot 1's output
    refs = [jpeg_bytes(Path(p).read_bytes()) for p in records[1].reference_images]
    assert [data_url_bytes(i) for i in lines[1]["images"]] == [*refs, jpeg_bytes(answers[0])]
    # shot 4 follows the refused shot 3 on the last success (shot 2's output), the official rule
    assert data_url_bytes(lines[3]["images"][-1]) == jpeg_bytes(answers[1])
    assert fallback.fields["prompt"] == lines[3]["prompt"]
    rows = {r["shot_index"]: r for r in _rows(tmp_path / "job")}
    assert sorted(rows) == SHOTS
    refused = rows[3]
    assert refused["status"] != "ok" and refused["category"] == "refused"
    assert "moderation_blocked: blocked" in refused["message"]
    assert all(rows[i]["status"] == "ok" for i in SHOTS if i != 3)
    usage = manifest["usage"]["image"]
    assert usage["batch_calls"] == 4 and usage["batch_fallback_calls"] == 1
    assert usage["cost_usd"] == pytest.approx(4 * BATCH_DISCOUNT * FULL_COST + FULL_COST)
    with ImageBatchServer() as server:
        again = run_task_job(tmp_path / "job2", f"image.base_url={server.openai_base_url}", *args)
        assert server.recorded == []
    assert again["stats"]["image/gpt_image"]["calls"] == 0
