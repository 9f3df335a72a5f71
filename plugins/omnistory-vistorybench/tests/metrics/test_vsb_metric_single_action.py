"""Single-character action inside CIDS: one question per matched crop through the real openai
SDK against a local Chat Completions server (well-formed, malformed, HTTP 500, unreachable)."""

from __future__ import annotations

import base64
import io
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omnistory_testkit import LocalChatServer, Reply
from omnistory_vistorybench.metrics import cids, cids_scoring
from omnistory_vistorybench.metrics.alignment_judge import SINGLE_CHARACTER_RUBRIC
from test_vsb_metric_cids import HalvesEncoder, SizeDetector
from vsb_metric_images import halves, noise, write_image

from omnistory_core.api import ComponentError

pytest.importorskip("openai")

RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)
LEFT, RIGHT, WHOLE = (0.25, 0.5, 0.5, 1.0), (0.75, 0.5, 0.5, 1.0), (0.5, 0.5, 1.0, 1.0)
#: our own stand-in for the official rubric file (which is not ours to copy)
RUBRIC = "STAND-IN single-character rubric: rate the named character's action 0-4."


@pytest.fixture
def rubric_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "user_prompts"
    folder.mkdir()
    (folder / SINGLE_CHARACTER_RUBRIC).write_text(RUBRIC, encoding="utf-8")
    return folder


@pytest.fixture
def story(tmp_path: Path, monkeypatch) -> dict[str, Any]:
    """A (Ann, ref red|green) and B (Bo, ref blue); shot 1 shows both, shot 2 only A (red|red),
    shot 3 lists B but nothing is detected (it never reaches the assignment)."""
    ref, out = tmp_path / "refs", tmp_path / "out"
    shot1 = np.concatenate([halves(RED, GREEN, 50, 50), halves(BLUE, BLUE, 50, 50)], axis=1)
    shot2 = np.concatenate([halves(RED, RED, 50, 51), halves(BLUE, BLUE, 50, 51)], axis=1)
    item = {
        "characters": {
            "A": {
                "name": "Ann",
                "tag": "non_human",
                "refs": [write_image(ref / "A.jpg", halves(RED, GREEN, 40, 40))],
            },
            "B": {
                "name": "Bo",
                "tag": "unrealistic_human",
                "refs": [write_image(ref / "B.jpg", halves(BLUE, BLUE, 41, 41))],
            },
        },
        "shots": [
            {"index": 1, "character_key": ["A", "B"], "script": "Ann waves at Bo"},
            {
                "index": 2,
                "character_key": ["A"],
                "Static Shot Description": {"en": "Ann sits", "ch": "安坐着"},
            },
            {"index": 3, "character_key": ["B"], "script": "Bo runs"},
        ],
        "candidate_shots": {
            1: write_image(out / "shot_01.png", shot1),
            2: write_image(out / "shot_02.png", shot2),
            3: write_image(out / "shot_03.png", noise(50, 104)),
        },
    }
    detector = SizeDetector(
        {
            (40, 40): [(WHOLE, 0.9)],
            (41, 41): [(WHOLE, 0.9)],
            (100, 50): [(RIGHT, 0.8), (LEFT, 0.9)],
            (102, 50): [(LEFT, 0.7)],
        }
    )
    monkeypatch.setitem(cids_scoring.DETECTORS, "sizes", lambda params: detector)
    monkeypatch.setitem(cids_scoring.ENCODERS, "halves", lambda params: HalvesEncoder())
    return item


def metric_for(base_url: str | None, rubric_dir: Path, **params: Any) -> cids.CIDSMetric:
    params = {
        "judge_max_retries": 1,
        "judge_retry_base_delay_s": 0.0,
        "judge_concurrency": 2,
        **params,
    }
    m = cids.CIDSMetric(
        detector="sizes",
        object_encoder="halves",
        judge_base_url=base_url,
        rubric_dir=str(rubric_dir),
        **params,
    )
    m.load()
    return m


def character(body: dict[str, Any]) -> str:
    return body["messages"][1]["content"][1]["text"].removeprefix("Evaluated Character Name is ")


def test_one_question_per_matched_crop(story, rubric_dir):
    score = {"Ann": 4, "Bo": 1}
    with LocalChatServer(
        lambda b: Reply(text=f"Analysis: fine.\nScore: {score[character(b)]}")
    ) as s:
        metric = metric_for(s.base_url, rubric_dir)
        (result,) = metric.run_batch([story])
        bodies = list(s.requests)
    assert result.status == "ok", result.detail
    # shot 1: int(round((4 + 1) / 2)) = 2 (half to even), shot 2: 4; story int(round(3.0))
    assert result.scores["single_character_action"] == 3
    shots = result.detail["single_character_action"]["shots"]
    assert {k: v["single_character_action"] for k, v in shots.items()} == {"1": 2, "2": 4}
    assert shots["1"]["characters"]["B"]["score"] == 1.0
    # CIDS itself is unchanged by the judge
    assert result.scores["occm"] == pytest.approx(
        round((100 + 100 + 100 * np.exp(-1 / 1.000001)) / 3, 4)
    )
    # the wire format: rubric as system, then script, name, crop (512x512 JPEG, detail low)
    assert len(bodies) == 3
    texts = sorted((b["messages"][1]["content"][0]["text"], character(b)) for b in bodies)
    assert texts == [("Ann sits", "Ann"), ("Ann waves at Bo", "Ann"), ("Ann waves at Bo", "Bo")]
    body = bodies[0]
    assert body["messages"][0] == {"role": "system", "content": [{"type": "text", "text": RUBRIC}]}
    assert (body["model"], body["temperature"], body["seed"], body["max_tokens"]) == (
        "gpt-4.1",
        0.0,
        123,
        512,
    )
    assert "top_p" not in body
    image = body["messages"][1]["content"][2]["image_url"]
    assert image["detail"] == "low" and image["url"].startswith("data:image/jpeg;base64,")
    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(image["url"].split(",", 1)[1]))) as img:
        assert img.size == (512, 512) and img.format == "JPEG"
    metric.unload()


def test_malformed_answers(story, rubric_dir):
    """Bo's answers never parse: with faithful it scores 0 after 10 tries (shot 1:
    int(round(1.5)) = 2, story int(round(2.5)) = 2); otherwise his crop is left out."""

    def reply(body: dict[str, Any]) -> Reply:
        return Reply(text="Score: 3" if character(body) == "Ann" else "I cannot tell.")

    with LocalChatServer(reply) as s:
        (faithful,) = metric_for(s.base_url, rubric_dir).run_batch([story])
        asked = len(s.requests)
        (alternative,) = metric_for(s.base_url, rubric_dir, faithful=False).run_batch([story])
        last = s.requests[-1]
    assert faithful.status == "ok" and faithful.scores["single_character_action"] == 2
    bo = faithful.detail["single_character_action"]["shots"]["1"]["characters"]["B"]
    assert bo["status"] == "unparsed" and bo["tries"] == 10 and bo["score"] == 0.0
    assert bo["temperatures"] == pytest.approx([0.1 * i for i in range(10)])
    assert asked == 2 + 10
    assert alternative.status == "ok" and alternative.scores["single_character_action"] == 3.0
    assert last["top_p"] == 0.2  # sent only with faithful=false


def test_nothing_parses_is_invalid_for_that_criterion(story, rubric_dir):
    with LocalChatServer(lambda b: Reply(text="no idea")) as s:
        (result,) = metric_for(s.base_url, rubric_dir, faithful=False, judge_max_tries=2).run_batch(
            [story]
        )
    assert result.status == "ok" and result.scores["single_character_action"] is None
    assert result.scores["cids_cross_mean"] is not None  # the CIDS criteria keep their values


def test_http_500_is_an_error_never_a_zero(story, rubric_dir):
    with LocalChatServer(lambda b: Reply(status=500, message="boom")) as s:
        (result,) = metric_for(s.base_url, rubric_dir, judge_max_retries=2).run_batch([story])
        asked = len(s.requests)
    assert result.status == "error" and not any(v is not None for v in result.scores.values())
    assert "500" in result.detail["error"] or "boom" in result.detail["error"]
    assert result.detail["computed_scores"]["occm"] is not None
    assert asked >= 3  # each question tried 1 + 2 times at least once


def test_unreachable_server(story, rubric_dir):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (result,) = metric_for(f"http://127.0.0.1:{port}/v1", rubric_dir, judge_timeout=2.0).run_batch(
        [story]
    )
    assert result.status == "error" and "shot" in result.detail["error"]


def test_judge_configuration(story, rubric_dir, tmp_path):
    with pytest.raises(ComponentError, match=f"skipped: .*{SINGLE_CHARACTER_RUBRIC}"):
        metric_for("http://127.0.0.1:9/v1", tmp_path / "nowhere")
    with pytest.raises(ComponentError, match="rubric_dir="):
        cids.CIDSMetric(
            detector="sizes", object_encoder="halves", judge_base_url="http://x/v1"
        ).load()
    keyed = cids.CIDSMetric(
        judge_base_url="http://x/v1", rubric_dir=str(rubric_dir)
    ).output_params()
    assert len(keyed["single_character_rubric_sha256"]) == 64 and "rubric_dir" not in keyed
    assert "single_character_rubric_sha256" not in cids.CIDSMetric().output_params()


def test_dry_run_estimate(story, rubric_dir):
    from omnistory_core.kit.planning.usage import count_tokens

    assert cids.CIDSMetric().pricing() is None  # no judge: no request
    assert cids.CIDSMetric(judge_base_url="http://127.0.0.1:8000/v1").pricing() is None
    priced = cids.CIDSMetric(
        judge_base_url="https://judge.example/v1",
        judge_model="m",
        judge_prices={"m": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
        rubric_dir=str(rubric_dir),
    )
    pricing = priced.pricing()
    estimate = priced.estimate(story, pricing, 10)
    # an upper bound: every onstage character of every shot with an output (A, B; A; B)
    questions = [
        ("Ann waves at Bo", "Ann"),
        ("Ann waves at Bo", "Bo"),
        ("Ann sits", "Ann"),
        ("Bo runs", "Bo"),
    ]
    image = -(-512 * 512 // 750)
    tokens_in = sum(
        count_tokens(RUBRIC)
        + count_tokens(t)
        + count_tokens(f"Evaluated Character Name is {n}")
        + image
        for t, n in questions
    )
    assert estimate["input_tokens"] == tokens_in and estimate["output_tokens"] == 40
    assert estimate["cost_usd"] == pytest.approx(tokens_in * 1e-6 + 40 * 2e-6)
    no_rubric = cids.CIDSMetric(judge_base_url="https://judge.example/v1").estimate(
        story, None, None
    )
    assert no_rubric == {"input_tokens": None, "output_tokens": 4 * 512}
    empty = dict(story, candidate_shots={})
    assert priced.estimate(empty, pricing, None)["input_tokens"] == 0
