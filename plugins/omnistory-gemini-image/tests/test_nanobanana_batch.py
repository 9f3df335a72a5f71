"""image=nanobanana with image.batch=true: the Gemini Batch API through the real google-genai SDK
against the test kit's local batch server (create, poll, inline results): on ViStoryBench one
batch per shot index across the stories, each shot's request exactly the synchronous one; per-
request errors; a pending batch collected by the next run without submitting anything again; a
re-run of a finished job makes no call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from omnistory_gemini_image.expert import NanoBanana
from omnistory_testkit import check_component
from omnistory_testkit.image_batch_server import ImageBatchServer
from omnistory_testkit.image_servers import ImageReply
from omnistory_testkit.runs import run_task_job
from omnistory_testkit.servers import BatchFate
from omnistory_vistorybench.dataset import fixture_root, load_stories, shot_records
from omnistory_vistorybench.generate import shot_inputs
from omnistory_vistorybench.hosted import STORY_READS, story_form

from omnistory_core.api import Failure, ImageOutput
from omnistory_core.kit.batches import BATCH_DISCOUNT, BatchLedger
from omnistory_core.kit.jobs import MediaHasher

KEY = "OMNI_NANOBANANA_BATCH_KEY"
MODEL = "gemini-3-pro-image-preview"
PRICES = {MODEL: {"input_per_mtok": 2.0, "output_per_mtok": 120.0}}
FULL_COST = (600 * 2.0 + 1290 * 120.0) / 1e6  # the local server's usage per answer


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "sk-local-nanobanana-batch")


@pytest.fixture(scope="module")
def stories() -> list[dict[str, Any]]:
    """Two story calls as the task builds them: the fixture's story (6 shots, 0 to 3 onstage
    characters) and a second one of 3 shots (other prompts, the same characters)."""
    [story] = load_stories(fixture_root(), split="lite", language="en")
    media = MediaHasher()
    shots = [
        {k: shot_inputs(r, story, media)[k] for k in STORY_READS} for r in shot_records([story])
    ]
    other = [{**s, "image_prompt": f"In another town. {s['image_prompt']}"} for s in shots[:3]]
    return [{"items": shots}, {"items": other}]


def expert(server: ImageBatchServer, store: Path | None, **params: Any) -> Any:
    form = story_form(NanoBanana, chain=True)(
        base_url=server.url,
        api_key_env=KEY,
        retry_base_delay_s=0.01,
        prices=PRICES,
        **{"batch": True, "batch_poll_s": 0.01, **params},
    )
    if store is not None:
        form.bind_store(store)  # what the engine does before the stage
    return form


def ledger(server: ImageBatchServer, store: Path) -> BatchLedger:
    return BatchLedger(store, "image-nanobanana", provider="gemini", endpoint=server.url)


def test_one_batch_per_shot_index_across_stories_with_the_synchronous_requests(
    stories: list[dict[str, Any]], tmp_path: Path
) -> None:
    with ImageBatchServer() as sync_server:  # the same stories, one request per shot
        plain = story_form(NanoBanana, chain=True)(base_url=sync_server.url, api_key_env=KEY)
        for story in stories:  # one story at a time: its requests in shot order
            plain.run_batch([story])
        sync = [r.body for r in sync_server.requests_for("gemini")]
    with ImageBatchServer(batch_polls=2) as server:
        form = expert(server, tmp_path)
        assert form.batch_size >= 1000  # the engine hands it every story of the stage at once
        results = form.run_batch(stories)
        creates = server.requests_for("gemini_batches")
        jobs = list(server.jobs.values())
        assert server.requests_for("gemini") == []  # nothing went the synchronous way
    # shot 1 of both stories, shot 2 of both, shot 3 of both, then the first story's last 3
    assert [len(job.lines) for job in jobs] == [2, 2, 2, 1, 1, 1]
    for create in creates:
        assert create.path == f"/v1beta/models/{MODEL}:batchGenerateContent"
        assert create.headers["x-goog-api-key"] == "sk-local-nanobanana-batch"
    # every line is exactly the synchronous request of its shot (parts in the official order,
    # images byte-equal, the previous shot chained on its own story's output), with its key
    first, second = sync[:6], sync[6:]
    expected = [first[0], second[0], first[1], second[1], first[2], second[2], *first[3:]]
    lines = [request for job in jobs for _, request in job.lines]
    assert [line["request"] for line in lines] == expected
    assert all(set(line) == {"request", "metadata"} for line in lines)
    assert len({line["metadata"]["key"] for line in lines}) == 9
    parts = [p for p in expected[2]["contents"][0]["parts"] if "text" in p]
    assert parts[-1] == {"text": "last reference shot:"}  # a chained shot
    # every shot's output, at the batch price, named by its batch
    assert [len(r) for r in results] == [6, 3]
    names = {job.id for job in jobs}
    for output in [o for story in results for o in story]:
        assert isinstance(output, ImageOutput)
        assert output.usage["batch"] is True and output.usage["batch_id"] in names
        assert output.usage["cost_usd"] == pytest.approx(BATCH_DISCOUNT * FULL_COST)
    assert ledger(server, tmp_path).entries() == []  # every story final: entries forgotten


def test_request_errors_in_a_batch_are_shot_failures_or_go_the_synchronous_way(
    stories: list[dict[str, Any]], tmp_path: Path
) -> None:
    with ImageBatchServer() as server:
        # shot 1 of story A is invalid, shot 1 of story B meets a transient error
        server.script(
            "gemini",
            ImageReply(status=400, message="image too small"),
            ImageReply(status=503, message="overloaded"),
        )
        a, b = expert(server, tmp_path).run_batch(stories)
        [retried] = server.requests_for("gemini")  # only B's shot 1, the synchronous way
    failure = a[0]
    assert isinstance(failure, Failure) and failure.category == "model_error"
    assert "gRPC code 3: image too small" in failure.message and "batch batches/" in failure.message
    assert isinstance(b[0], ImageOutput) and b[0].usage["batch_fallback_calls"] == 1
    assert "batch" not in b[0].usage and b[0].usage["cost_usd"] == pytest.approx(FULL_COST)
    assert retried.body == server.jobs["batches/gbatch000001"].lines[1][1]["request"]
    # after a failed shot the official rule sends the next without a previous shot
    second = server.jobs["batches/gbatch000002"].lines[0][1]["request"]
    assert {"text": "last reference shot:"} not in second["contents"][0]["parts"]
    assert all(isinstance(o, ImageOutput) for o in [*a[1:], *b])


def test_a_pending_batch_is_collected_by_the_next_run_without_submitting_again(
    stories: list[dict[str, Any]], tmp_path: Path
) -> None:
    story = stories[0]
    with ImageBatchServer() as server:
        server.script_batch(BatchFate(), BatchFate(), BatchFate("pending"))
        first = expert(server, tmp_path, batch_wait_s=0.05).run_batch([story])[0]
        assert [type(o).__name__ for o in first[:2]] == ["ImageOutput", "ImageOutput"]
        waiting = first[2:]
        assert all(isinstance(f, Failure) and f.category == "batch_pending" for f in waiting)
        assert "waiting for shot 3 of the story" in waiting[1].message
        # shots 1-2 (ended) and 3 (pending) stay in the ledger: the story is not final
        assert len(ledger(server, tmp_path).entries()) == 3
        assert server.batch_creations() == 3

        server.end_batches()
        again = expert(server, tmp_path).run_batch([story])[0]  # a new process: the store
        assert all(isinstance(o, ImageOutput) for o in again)
        # shots 1-3 were not submitted again: their ended batches were read back
        assert server.batch_creations() == 3 + 3 and server.requests_for("gemini") == []
        jobs = list(server.jobs.values())
        assert [o.usage["batch_id"] for o in again] == [j.id for j in jobs]
        assert [o.image.tobytes() for o in again[:2]] == [o.image.tobytes() for o in first[:2]]
    assert ledger(server, tmp_path).entries() == []


def _rows(job_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (job_dir / "records.jsonl").read_text().splitlines()]


def test_a_batch_job_writes_the_shots_and_a_rerun_makes_no_call(tmp_path: Path) -> None:
    args = (
        "system=nanobanana_pro",
        "dataset=vistory_fixture",
        f"image.api_key_env={KEY}",
        "image.batch=true",
        "image.batch_poll_s=0.01",
        "engine.progress=false",
        f"engine.store={tmp_path / 'store'}",
    )
    with ImageBatchServer() as server:
        server.script("gemini", ImageReply(), ImageReply(declined=True, message="unsafe"))
        manifest = run_task_job(tmp_path / "job", f"image.base_url={server.url}", *args)
        assert server.batch_creations() == 6 and server.requests_for("gemini") == []
    rows = _rows(tmp_path / "job")
    assert [(r["shot_index"], r["status"]) for r in rows if r["status"] != "ok"] == [(2, "failure")]
    failed = next(r for r in rows if r["status"] != "ok")
    assert failed["category"] == "refused" and "unsafe" in failed["message"]
    usage = manifest["usage"]["image"]
    assert usage["batch_calls"] == 5 and usage["images"] == 5
    with ImageBatchServer() as server:
        again = run_task_job(tmp_path / "job2", f"image.base_url={server.url}", *args)
        assert server.recorded == []
    assert again["stats"]["image/nanobanana"]["calls"] == 0


def test_a_run_killed_while_it_polls_resumes_from_the_ledger(tmp_path: Path) -> None:
    """The CLI is killed (SIGKILL) while shot 3's batch is pending; the re-run re-reads the
    ended batches of shots 1-2, polls shot 3's and submits only shots 4-6."""
    args = [
        "system=nanobanana_pro",
        "dataset=vistory_fixture",
        f"image.api_key_env={KEY}",
        "image.batch=true",
        "image.batch_poll_s=0.05",
        "engine.progress=false",
        f"engine.store={tmp_path / 'store'}",
        f"output_root={tmp_path / 'out'}",
    ]
    env = {**os.environ, KEY: "sk-local-nanobanana-batch", "PYTHONUNBUFFERED": "1"}
    with ImageBatchServer() as server:
        server.script_batch(BatchFate(), BatchFate(), BatchFate("pending"))
        command = [sys.executable, "-m", "omnistory_core", *args, f"image.base_url={server.url}"]
        proc = subprocess.Popen(
            command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 120
            while len(server.requests_for("gemini_batch")) < 4:  # 2 ended, the third polled
                assert proc.poll() is None, "the run ended before its third batch did"
                assert time.monotonic() < deadline, "no third batch polled within 120 s"
                time.sleep(0.05)
        finally:
            proc.kill()
            proc.wait()
        assert len(ledger(server, tmp_path / "store").entries()) == 3
        server.end_batches()
        run_task_job(tmp_path / "job", *args, f"image.base_url={server.url}")
        assert server.batch_creations() == 3 + 3 and server.requests_for("gemini") == []
    rows = _rows(tmp_path / "job")
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    assert ledger(server, tmp_path / "store").entries() == []


def test_on_omnistorybench_the_batch_mode_keeps_the_component_contract() -> None:
    with ImageBatchServer() as server:
        report = check_component(
            NanoBanana,
            base_url=server.url,
            api_key_env=KEY,
            batch=True,
            batch_poll_s=0.01,
            vary={"image_size": "2K"},
        )
        lines = server.batch_lines("gemini")
        assert server.requests_for("gemini") == []  # every page went in a batch
    assert {"outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    # conditioned on the current page: prompt, the label, the page
    parts = lines[0][1]["request"]["contents"][0]["parts"]
    assert [sorted(p) for p in parts] == [["text"], ["text"], ["inlineData"]]
