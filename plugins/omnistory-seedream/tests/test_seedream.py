"""image=seedream through the real OpenAI SDK against the test kit's local images server: the
official ViStoryBench request of each shot (0, 1 and 3 onstage characters, the chained second
shot), retries, a declined shot (the chain goes on from the last success), re-runs from the
store, the dry run's per-image price, and the Omni-StoryBench contract."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from omnistory_seedream.expert import OFFICIAL_NEGATIVE, OFFICIAL_PREFIX, Seedream
from omnistory_testkit import check_component
from omnistory_testkit.image_servers import ImageReply, ImageServer
from omnistory_testkit.runs import run_task_job
from omnistory_vistorybench.dataset import fixture_root, load_stories, shot_records

from omnistory_core.kit.hosted_images import jpeg_bytes

KEY = "OMNI_SEEDREAM_TEST_KEY"
SHOTS = [1, 2, 3, 4, 5, 7]
PREFIX = "data:image/jpeg;base64,"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "sk-local-seedream-canary")


def job(tmp: Path, server: ImageServer, *extra: str) -> Any:
    return run_task_job(
        tmp / "job",
        "system=seedream4",
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


def images_of(body: dict[str, Any]) -> list[bytes]:
    urls = body.get("image") or []
    assert all(u.startswith(PREFIX) for u in urls)
    return [base64.b64decode(u[len(PREFIX) :]) for u in urls]


def test_each_shot_sends_the_official_body_chained_on_the_previous_output(tmp_path: Path) -> None:
    shots = records()
    with ImageServer() as server:
        server.script("images", ImageReply.rate_limited("0"))
        manifest = job(
            tmp_path, server, "image.prices={doubao-seedream-4-0-250828: {per_image: 0.03}}"
        )
        sent = server.requests_for("images")
        answers = list(server.images)
    assert len(sent) == len(SHOTS) + 1 and sent[0].body == sent[1].body
    for index, request in zip(SHOTS, sent[1:], strict=True):
        body = dict(request.body)
        assert request.path == "/v1/images/generations"
        assert request.headers["authorization"] == "Bearer sk-local-seedream-canary"
        record = shots[index]
        assert body.pop("prompt") == (
            f"{OFFICIAL_PREFIX}{record.prompt}\nNegative prompt: {OFFICIAL_NEGATIVE}"
        )
        got = images_of(body)
        body.pop("image", None)
        assert body == {
            "model": "doubao-seedream-4-0-250828",
            "size": "4096x2304",
            "response_format": "b64_json",
            "stream": False,
            "watermark": False,
            "sequential_image_generation": "disabled",
        }
        refs = [jpeg_bytes(Path(p).read_bytes(), 95) for p in record.reference_images]
        if index == SHOTS[0]:
            assert got == refs == []  # no character, no previous shot: no image field
        else:
            previous = answers[SHOTS.index(index) - 1]
            assert got == [*refs, jpeg_bytes(previous, 95)]
    assert [len(shots[i].reference_images) for i in (1, 2, 4)] == [0, 1, 3]
    layout = manifest["layout"]
    assert (layout["method"], layout["mode"]) == ("Seedream4", "base")
    usage = manifest["usage"]["image"]
    assert usage["images"] == len(SHOTS) and usage["cost_usd"] == pytest.approx(0.03 * len(SHOTS))
    with ImageServer() as server:
        again = job(tmp_path, server)
        assert server.recorded == []
    assert again["stats"]["image/seedream"]["calls"] == 0


def test_a_declined_shot_fails_alone_and_the_chain_goes_on_from_the_last_success(
    tmp_path: Path,
) -> None:
    declined = ImageReply(status=400, code="InputTextSensitiveContentDetected", message="risky")
    with ImageServer() as server:
        server.script("images", ImageReply(), declined)
        job(tmp_path, server)
        sent = server.requests_for("images")
        first = server.images[0]
    rows = [json.loads(x) for x in (tmp_path / "job" / "records.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r["status"] != "ok"]
    assert [(r["shot_index"], r["category"]) for r in failed] == [(2, "refused")]
    assert "InputTextSensitiveContentDetected" in failed[0]["message"]
    assert "risky" in failed[0]["message"]
    assert images_of(sent[2].body)[-1] == jpeg_bytes(first, 95)  # shot 3 after shot 1
    assert len(sent) == len(SHOTS)


def test_the_dry_run_prices_per_image(tmp_path: Path) -> None:
    with ImageServer() as server:
        plan = job(
            tmp_path,
            server,
            "engine.dry_run=true",
            "image.prices={doubao-seedream-4-0-250828: {per_image: 0.03}}",
        )
        assert server.recorded == []
    row = plan["components"]["image/seedream"]
    assert row["calls"] == 1 and row["est_cost_usd"] == pytest.approx(0.03 * len(SHOTS))


def test_without_a_base_url_the_job_stops_before_any_call(tmp_path: Path) -> None:
    from omnistory_core.kit.jobs import ComponentUnavailable

    with pytest.raises(ComponentUnavailable, match="image.base_url"):
        run_task_job(
            tmp_path / "job",
            "system=seedream4",
            "dataset=vistory_fixture",
            f"image.api_key_env={KEY}",
            "engine.progress=false",
            f"engine.store={tmp_path / 'store'}",
        )


def test_batch_mode_is_refused_in_one_line_before_any_call(tmp_path: Path) -> None:
    from omnistory_core.api import ParamError

    with ImageServer() as server:
        with pytest.raises(ParamError) as caught:
            job(tmp_path, server, "+image.batch=true")
        assert server.recorded == []
    message = str(caught.value)
    assert "\n" not in message and "image.batch=true is not supported" in message
    assert "no batch mode" in message
    # batch=false is the synchronous path, accepted as a no-op
    assert Seedream(base_url=server.openai_base_url, batch=False).params.get("batch") is None


def test_on_omnistorybench_it_keeps_the_component_contract() -> None:
    with ImageServer() as server:
        report = check_component(
            Seedream, base_url=server.openai_base_url, api_key_env=KEY, vary={"size": "2048x1152"}
        )
        sent = server.requests_for("images")
    assert {"outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert len(images_of(sent[0].body)) == 1  # the current page
