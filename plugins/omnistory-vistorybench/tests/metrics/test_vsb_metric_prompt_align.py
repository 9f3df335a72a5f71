"""Prompt alignment through the real openai SDK against a local Chat Completions server."""

from __future__ import annotations

import base64
import io
import socket
from pathlib import Path
from typing import Any

import pytest
from omnistory_testkit import LocalChatServer, Reply
from omnistory_vistorybench.metrics.alignment_judge import (
    RUBRIC_FILES,
    chat_base_url,
    image_base64,
    parse_score,
    single_character_messages,
)
from omnistory_vistorybench.metrics.prompt_align import PromptAlignMetric
from vsb_metric_images import noise, write_image

from omnistory_core.api import ComponentError

pytest.importorskip("openai")

#: our own stand-ins for the official rubric files (which are not ours to copy)
RUBRICS = {
    "scene": "STAND-IN scene rubric: rate the environment 0-4. End with 'Score: N'.",
    "character_action": "STAND-IN action rubric: rate the main character's action 0-4.",
    "camera": "STAND-IN camera rubric: rate shot distance and angle 0-4.",
}
SHOT = {
    "index": 3,
    "Setting Description": {"en": "a snowy forest at dusk", "ch": "黄昏时的雪林"},
    "Static Shot Description": {"en": "the fox leaps over a log", "ch": "狐狸跳过木头"},
    "Shot Perspective Design": {"en": "wide shot, low angle", "ch": "远景，仰拍"},
}


@pytest.fixture
def rubric_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "user_prompts"
    folder.mkdir()
    for dim, text in RUBRICS.items():
        (folder / RUBRIC_FILES[dim]).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def item(tmp_path: Path) -> dict[str, Any]:
    image = write_image(tmp_path / "shot_03.png", noise(90, 160, seed=3))
    return {"candidate_image": image, "shot": SHOT}


def dimension(body: dict[str, Any]) -> str:
    rubric = body["messages"][0]["content"][0]["text"]
    return next(dim for dim, text in RUBRICS.items() if text == rubric)


def metric_for(server: LocalChatServer, rubric_dir: Path, **params: Any) -> PromptAlignMetric:
    params = {"max_retries": 1, "retry_base_delay_s": 0.0, "concurrency": 3, **params}
    m = PromptAlignMetric(base_url=server.base_url, rubric_dir=str(rubric_dir), **params)
    m.load()
    return m


def test_parse_score_is_the_official_regex():
    assert parse_score("Analysis: fine.\nScore: 3") == 3
    assert parse_score("score:4") == 4
    assert parse_score("Score: Good 1") == 1  # one word may stand between
    assert parse_score("Score: 3/4") == 3
    assert parse_score("Score: 1 ... final Score: 4") == 1  # the first match
    assert parse_score("**Score:** 3") is None
    assert parse_score("The score is 3") is None
    assert parse_score(None) is None


def test_base_url_as_the_official_builds_it():
    assert chat_base_url("http://h:1") == "http://h:1/v1"
    assert chat_base_url("http://h:1/v1/") == "http://h:1/v1"
    assert chat_base_url(None) is None


def test_scores_and_wire_format(rubric_dir, item, monkeypatch):
    monkeypatch.setenv("VSB_TEST_KEY", "sk-test")
    score = {"scene": 4, "character_action": 2, "camera": 3}
    with LocalChatServer(lambda b: Reply(text=f"Analysis: ok.\nScore: {score[dimension(b)]}")) as s:
        metric = metric_for(s, rubric_dir, api_key_env="VSB_TEST_KEY")
        (result,) = metric.run_batch([item])
        bodies = s.requests
        headers = [r.headers for r in s.requests_for("chat")]
    assert result.status == "ok"
    assert result.scores == {"scene": 4.0, "camera": 3.0, "character_action": 2.0}
    assert len(bodies) == 3 and all(h["authorization"] == "Bearer sk-test" for h in headers)
    by_dim = {dimension(b): b for b in bodies}
    for dim, field in (
        ("scene", "Setting Description"),
        ("character_action", "Static Shot Description"),
        ("camera", "Shot Perspective Design"),
    ):
        body = by_dim[dim]
        assert body["model"] == "gpt-4.1" and body["temperature"] == 0.0
        assert body["seed"] == 123 and body["max_tokens"] == 512
        assert "top_p" not in body  # the official helper never sends it
        (message,) = body["messages"]
        assert message["role"] == "user"
        rubric, text, image = message["content"]
        assert rubric == {"type": "text", "text": RUBRICS[dim]}
        assert text == {"type": "text", "text": SHOT[field]["en"]}
        url = image["image_url"]["url"]
        assert image["type"] == "image_url" and url.startswith("data:image/jpeg;base64,")
        from PIL import Image

        decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        assert decoded.format == "JPEG" and decoded.size == (512, 512)
    assert result.detail["scene"]["tries"] == 1


def test_malformed_answers_ten_tries_then_zero(rubric_dir, item):
    with LocalChatServer(lambda b: Reply(text="I cannot rate this image.")) as s:
        (result,) = metric_for(s, rubric_dir).run_batch([item])
        bodies = s.requests
    assert result.status == "ok" and result.scores == dict.fromkeys(result.scores, 0.0)
    assert len(bodies) == 30
    temps = [b["temperature"] for b in bodies if dimension(b) == "camera"]
    assert temps == pytest.approx([0.1 * i for i in range(10)])
    assert result.detail["camera"]["status"] == "unparsed"
    assert result.detail["camera"]["tries"] == 10


def test_malformed_answers_invalid_when_not_faithful(rubric_dir, item):
    def reply(body: dict[str, Any]) -> Reply:
        good = dimension(body) == "scene" and body["temperature"] > 0.25
        return Reply(text="Score: 2" if good else "no idea")

    with LocalChatServer(reply) as s:
        (result,) = metric_for(s, rubric_dir, faithful=False).run_batch([item])
        bodies = s.requests
    assert result.status == "invalid"
    assert result.scores == {"scene": 2.0, "camera": None, "character_action": None}
    assert result.detail["scene"]["tries"] == 4  # 0.0, 0.1, 0.2, then 0.3 parses
    assert all(b["top_p"] == 0.2 for b in bodies)  # sent only with faithful=false


def test_http_500_is_an_error_never_a_zero(rubric_dir, item):
    with LocalChatServer(lambda b: Reply(status=500, message="boom")) as s:
        (result,) = metric_for(s, rubric_dir, max_retries=2).run_batch([item])
        bodies = s.requests
    assert result.status == "error"
    assert result.scores == {"scene": None, "camera": None, "character_action": None}
    assert len(bodies) == 9  # 3 questions x (1 try + 2 retries)
    assert "HTTP 500" in result.detail["scene"]["error"]


def test_one_failing_dimension(rubric_dir, item):
    def reply(body: dict[str, Any]) -> Reply:
        if dimension(body) == "camera":
            return Reply(status=400, message="bad request")
        return Reply(text="Score: 3")

    with LocalChatServer(reply) as s:
        (result,) = metric_for(s, rubric_dir).run_batch([item])
        assert len(s.requests) == 3  # a 400 is not retried
    assert result.status == "error"
    assert result.scores == {"scene": 3.0, "camera": None, "character_action": 3.0}


def test_short_answers_are_asked_again_at_the_same_temperature(rubric_dir, item):
    answers: dict[str, int] = {}

    def reply(body: dict[str, Any]) -> Reply:
        dim = dimension(body)
        answers[dim] = answers.get(dim, 0) + 1
        return Reply(text="3" if answers[dim] == 1 else "Score: 3")

    with LocalChatServer(reply) as s:
        (result,) = metric_for(s, rubric_dir, max_retries=1).run_batch([item])
        bodies = s.requests
    assert result.status == "ok" and result.scores["scene"] == 3.0
    assert len(bodies) == 6 and {b["temperature"] for b in bodies} == {0.0}
    assert result.detail["scene"]["tries"] == 1


def test_unreachable_server(rubric_dir, item, tmp_path):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    metric = PromptAlignMetric(
        base_url=f"http://127.0.0.1:{port}",
        rubric_dir=str(rubric_dir),
        max_retries=1,
        retry_base_delay_s=0.0,
        timeout=5.0,
        concurrency=1,
    )
    second = dict(item, candidate_image=write_image(tmp_path / "b.png", noise(20, 20)))
    results = metric.run_batch([item, second])
    assert [r.status for r in results] == ["error", "error"]
    assert "unreachable earlier" in results[1].detail["scene"]["error"]


def test_inputs_that_cannot_be_judged(rubric_dir, item, tmp_path):
    with LocalChatServer(lambda b: Reply(text="Score: 4")) as s:
        metric = metric_for(s, rubric_dir)
        no_image = dict(item, candidate_image=None)
        no_text = dict(item, shot={"index": 1, "scene": "a room"})
        results = metric.run_batch([no_image, no_text, item])
        assert len(s.requests) == 3
    assert [r.status for r in results] == ["invalid", "invalid", "ok"]
    assert "character_action" in results[1].detail["error"]


def test_language(rubric_dir, item):
    with LocalChatServer(lambda b: Reply(text="Score: 1")) as s:
        metric_for(s, rubric_dir, language="ch").run_batch([item])  # faithful: English anyway
        metric_for(s, rubric_dir, language="ch", faithful=False).run_batch([item])
        texts = [b["messages"][0]["content"][1]["text"] for b in s.requests]
    assert set(texts[:3]) == {SHOT[f]["en"] for f in SHOT if f != "index"}
    assert set(texts[3:]) == {SHOT[f]["ch"] for f in SHOT if f != "index"}


def test_rubrics_are_in_the_cache_key_and_required(rubric_dir, tmp_path):
    metric = PromptAlignMetric(rubric_dir=str(rubric_dir))
    before = metric.output_params()
    assert set(before["rubric_sha256"]) == set(RUBRIC_FILES) and "rubric_dir" not in before
    (rubric_dir / RUBRIC_FILES["camera"]).write_text("another camera rubric", encoding="utf-8")
    after = PromptAlignMetric(rubric_dir=str(rubric_dir)).output_params()
    assert after["rubric_sha256"]["camera"] != before["rubric_sha256"]["camera"]
    assert after["rubric_sha256"]["scene"] == before["rubric_sha256"]["scene"]
    with pytest.raises(ComponentError, match="skipped: metric=prompt_align"):
        PromptAlignMetric().load()
    with pytest.raises(ComponentError, match="lacks"):
        PromptAlignMetric(rubric_dir=str(tmp_path)).load()


def test_image_encoding_and_single_character_question(tmp_path):
    from PIL import Image

    path = tmp_path / "rgba.png"
    Image.new("RGBA", (30, 20), (10, 200, 30, 128)).save(path)
    decoded = Image.open(io.BytesIO(base64.b64decode(image_base64(str(path)))))
    assert (decoded.format, decoded.mode, decoded.size) == ("JPEG", "RGB", (512, 512))
    system, user = single_character_messages("RUBRIC", "the fox leaps", "Pip", "QUJD")
    assert system == {"role": "system", "content": [{"type": "text", "text": "RUBRIC"}]}
    assert user["content"][1] == {"type": "text", "text": "Evaluated Character Name is Pip"}
    assert user["content"][2]["image_url"] == {
        "url": "data:image/jpeg;base64,QUJD",
        "detail": "low",
    }
