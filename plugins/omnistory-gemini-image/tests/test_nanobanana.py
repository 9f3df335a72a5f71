"""image=nanobanana through the real google-genai SDK against the test kit's local Gemini server:
the official ViStoryBench request of each shot (0, 1 and 3 onstage characters, the chained second
shot), retries, a declined shot, re-runs from the store, the dry run's price, and the
Omni-StoryBench contract (conditioned on the current page)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from omnistory_gemini_image.expert import NanoBanana
from omnistory_testkit import check_component
from omnistory_testkit.image_servers import ImageReply, ImageServer
from omnistory_testkit.runs import run_task_job
from omnistory_vistorybench.dataset import fixture_root, load_stories, shot_records

from omnistory_core.kit.hosted_images import jpeg_bytes

KEY = "OMNI_NANOBANANA_TEST_KEY"
#: story 01 of the fixture (lite): shot index -> onstage characters with a reference
SHOTS = [1, 2, 3, 4, 5, 7]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "sk-local-nanobanana-canary")


def job(tmp: Path, server: ImageServer, *extra: str) -> Any:
    return run_task_job(
        tmp / "job",
        "system=nanobanana_pro",
        "dataset=vistory_fixture",
        f"image.base_url={server.url}",
        f"image.api_key_env={KEY}",
        "image.retry_base_delay_s=0.01",
        "engine.progress=false",
        f"engine.store={tmp / 'store'}",
        *extra,
    )


def records() -> dict[int, Any]:
    stories = load_stories(fixture_root(), split="lite", language="en")
    return {r.shot_index: r for r in shot_records(stories)}


def parts(request: Any) -> list[dict[str, Any]]:
    [content] = request.body["contents"]
    assert content["role"] == "user"
    return content["parts"]


def image_of(part: dict[str, Any]) -> bytes:
    """An inline image part as google-genai sends it (``mime_type``, URL-safe base64)."""
    inline = part["inlineData"]
    assert (inline.get("mimeType") or inline.get("mime_type")) == "image/jpeg"
    return base64.urlsafe_b64decode(inline["data"])


def test_each_shot_sends_the_official_parts_chained_on_the_previous_output(tmp_path: Path) -> None:
    shots = records()
    with ImageServer() as server:
        server.script("gemini", ImageReply.rate_limited("0"))  # the first call: 429, then ok
        manifest = job(tmp_path, server)
        sent = server.requests_for("gemini")
        answers = list(server.images)
    # one request per shot in story order, plus the retried first one (identical)
    assert len(sent) == len(SHOTS) + 1 and sent[0].body == sent[1].body
    sent = sent[1:]
    for request in sent:
        assert request.path == "/v1beta/models/gemini-3-pro-image-preview:generateContent"
        assert request.headers["x-goog-api-key"] == "sk-local-nanobanana-canary"
        assert request.body["generationConfig"] == {
            "responseModalities": ["TEXT", "IMAGE"],
            "imageConfig": {"aspectRatio": "16:9", "imageSize": "4K"},
        }
    by_shot = dict(zip(SHOTS, sent, strict=True))
    for index, request in by_shot.items():
        got = parts(request)
        record = shots[index]
        refs = [jpeg_bytes(Path(p).read_bytes(), 95) for p in record.reference_images]
        assert got[0] == {"text": record.prompt}  # the merged prompt, no prefix
        assert [image_of(p) for p in got[1 : 1 + len(refs)]] == refs
        if index == SHOTS[0]:  # the first shot: no previous shot
            assert len(got) == 1 + len(refs)
        else:  # the previous shot's output, after its label
            previous = answers[SHOTS.index(index) - 1]
            assert got[1 + len(refs)] == {"text": "last reference shot:"}
            assert image_of(got[2 + len(refs)]) == jpeg_bytes(previous, 95)
    # 0, 1 and 3 onstage characters are among them
    assert [len(shots[i].reference_images) for i in (1, 2, 4)] == [0, 1, 3]
    layout = manifest["layout"]
    assert (layout["method"], layout["mode"]) == ("NanoBanana", "Gemini3ProImagePreview")
    written = sorted((tmp_path / "job" / layout["run_dir"] / "01" / "shots").glob("*.png"))
    assert [p.name for p in written] == [f"shot_{i:02d}.png" for i in SHOTS]
    usage = manifest["usage"]["image"]
    assert usage["images"] == len(SHOTS) and usage["attempts"] == len(SHOTS) + 1
    assert usage["output_tokens"] == 1290 * len(SHOTS)
    # a re-run makes no call
    with ImageServer() as server:
        again = job(tmp_path, server)
        assert server.recorded == []
    assert again["stats"]["image/nanobanana"]["calls"] == 0


def test_a_declined_shot_is_its_own_failure_and_the_next_gets_no_previous(tmp_path: Path) -> None:
    with ImageServer() as server:
        server.script("gemini", ImageReply(), ImageReply(declined=True, message="unsafe"))
        job(tmp_path, server)
        sent = server.requests_for("gemini")
    rows = [json.loads(x) for x in (tmp_path / "job" / "records.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r["status"] != "ok"]
    assert [(r["shot_index"], r["category"]) for r in failed] == [(2, "refused")]
    assert "PROHIBITED_CONTENT" in failed[0]["message"] and "unsafe" in failed[0]["message"]
    # the official rule after a failure: the next shot is sent without a previous shot
    third = parts(sent[2])
    assert not any(p.get("text") == "last reference shot:" for p in third)
    assert len(sent) == len(SHOTS)  # a declined answer is not asked again


def test_the_dry_run_prices_each_shot_of_the_story_and_calls_nothing(tmp_path: Path) -> None:
    prices = (
        "image.prices={gemini-3-pro-image-preview: {input_per_mtok: 2.0, output_per_mtok: 120.0}}"
    )
    with ImageServer() as server:
        plan = job(tmp_path, server, "engine.dry_run=true", prices)
        assert server.recorded == []
    row = plan["components"]["image/nanobanana"]
    assert row["calls"] == 1  # one story call
    assert row["est_output_tokens"] == 2000 * len(SHOTS)  # a 4K image each
    assert row["est_cost_usd"] > 2000 * len(SHOTS) * 120.0 / 1e6


def test_on_omnistorybench_it_keeps_the_component_contract() -> None:
    with ImageServer() as server:
        report = check_component(
            NanoBanana, base_url=server.url, api_key_env=KEY, vary={"image_size": "2K"}
        )
        sent = server.requests_for("gemini")
    assert {"outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    # conditioned on the current page: prompt, the label, the page
    got = parts(sent[0])
    assert [sorted(p) for p in got] == [["text"], ["text"], ["inlineData"]]
    assert got[1] == {"text": "last reference shot:"}
