"""The hyperclova backbone against a local OmniServe stand-in, through the real openai SDK."""

from __future__ import annotations

import base64
import io
import json
import time
from pathlib import Path

import numpy as np
import pytest
from hcx_fake_omniserve import FakeOmniServe, Reply, png_bytes
from omnistory_hyperclova.backbone import HyperClovaOmni
from omnistory_testkit import demo_planner_items

from omnistory_core.api import BackboneOutput, Failure, Media

FAST = {
    "image_retry_delay_s": 0.01,
    "speech_retry_delay_s": 0.01,
    "retry_base_delay_s": 0.01,
    "timeout_s": 10,
    "download_timeout_s": 10,
}


def make(server: FakeOmniServe, **params) -> HyperClovaOmni:
    return HyperClovaOmni(base_url=server.base_url, **{**FAST, **params})


def run(server: FakeOmniServe, items=None, **params) -> list:
    backbone = make(server, **params)
    try:
        return backbone.run_batch(items or demo_planner_items(1))
    finally:
        backbone.unload()


def test_three_requests_shape_and_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNISTORY_HYPERCLOVA_API_KEY", "hcx-test-key-123")
    item = demo_planner_items(1)[0]
    with FakeOmniServe() as srv:
        [out] = run(srv, [item])
        text, image, speech = srv.of("text"), srv.of("image"), srv.of("speech")
        media_headers = [h for _, h in srv.media_requests]
    assert isinstance(out, BackboneOutput) and out.failures == {}
    assert out.text == "Pip tapped on the glass again."
    from PIL import Image

    assert out.image[:8] == b"\x89PNG\r\n\x1a\n"
    assert Image.open(io.BytesIO(out.image)).size == (12, 12)
    assert out.speech.sample_rate == 16000 and out.speech.samples.dtype == np.float32
    assert out.speech.samples.shape == (3200,) and float(np.abs(out.speech.samples).max()) > 0.2

    assert (len(text), len(image), len(speech)) == (1, 1, 1)
    page = base64.b64encode(Path(item["current_image"].path).read_bytes()).decode()
    for seen, max_tokens in ((text[0], 2048), (image[0], 7000), (speech[0], 2048)):
        body = seen.body
        assert body["model"] == "track_b_model" and body["max_tokens"] == max_tokens
        assert body["chat_template_kwargs"] == {"thinking": True}
        assert body["thinking_token_budget"] == 1024 and body["skip_special_tokens"] is False
        assert not {"temperature", "top_p", "seed", "tool_choice"} & set(body)
        assert seen.headers["authorization"] == "Bearer hcx-test-key-123"
    # (1) text: the page image inline, our two-line prompt with the inputs
    content = text[0].body["messages"][0]["content"]
    assert content[0] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{page}"},
    }
    assert item["current_text"] in content[1]["text"] and "NARRATION:" in content[1]["text"]
    # (2) image: system prompt + the t2i tool, page image, narration in the prompt
    messages = image[0].body["messages"]
    assert messages[0]["role"] == "system" and "t2i_model_generation" in messages[0]["content"]
    assert [t["function"]["name"] for t in image[0].body["tools"]] == ["t2i_model_generation"]
    assert messages[1]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert "Pip tapped on the glass again." in messages[1]["content"][1]["text"]
    assert "Lena, the moon fell down!" not in image[0].prompt
    # (3) speech: text only, the SPEECH line and the voice direction
    prompt = speech[0].body["messages"][0]["content"]
    assert isinstance(prompt, str) and "Lena, the moon fell down!" in prompt
    assert "- Pip; emotion: urgent; speech_intent:" in prompt
    assert "- ambient sound: soft tapping on glass" in prompt
    # signed media URLs are fetched without the API key
    assert len(media_headers) == 2 and all("authorization" not in h for h in media_headers)
    # usage: counts and diagnostics, the signature cut from the URLs
    assert out.usage["requests"] == 3 and out.usage["input_tokens"] == 300
    assert out.usage["speech_line"] == "Lena, the moon fell down!"
    assert out.usage["image_url"].endswith(".png?...") and "Signature" not in json.dumps(out.usage)


def test_reasoning_off_and_sampling_overrides() -> None:
    with FakeOmniServe() as srv:
        run(srv, reasoning=False, temperature=0.5, sampling_seed=7, tool_choice="named")
        bodies = [r.body for r in srv.requests]
    for body in bodies:
        assert body["chat_template_kwargs"] == {"skip_reasoning": True}
        assert "thinking_token_budget" not in body and "skip_special_tokens" not in body
        assert body["temperature"] == 0.5 and body["seed"] == 7
    image = next(b for b in bodies if "tools" in b)
    assert image["tool_choice"] == {
        "type": "function",
        "function": {"name": "t2i_model_generation"},
    }


def test_forbidden_image_url_fails_only_the_image() -> None:
    with FakeOmniServe() as srv:
        srv.forbid_when["image"] = "Draw"  # every image prompt: the signed URL answers 403
        [out] = run(srv, image_attempts=3)
        assert len(srv.of("image")) == 3
    assert out.text and out.speech is not None and set(out.failures) == {"image"}
    failure = out.failures["image"]
    assert failure.category == "model_error"
    assert failure.message.startswith("image failed after 3 attempts: image download from http")
    assert "returned HTTP 403 Forbidden (the signed URL expired" in failure.message
    assert "Signature" not in failure.message and "?..." in failure.message
    assert out.usage["image_attempts"] == 3 and len(out.usage["image_attempt_errors"]) == 3


def test_forbidden_speech_url_fails_only_the_speech() -> None:
    with FakeOmniServe() as srv:
        srv.forbid_when["speech"] = "Speak"
        [out] = run(srv)
    assert out.text and out.image is not None and set(out.failures) == {"speech"}
    assert out.failures["speech"].category == "model_error"
    assert "speech download from" in out.failures["speech"].message
    assert "HTTP 403" in out.failures["speech"].message


def test_image_retried_until_the_tool_call_arrives() -> None:
    with FakeOmniServe() as srv:
        srv.script(
            "image",
            Reply(message={"content": "I would rather describe it."}),
            Reply(
                message={
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "t",
                            "type": "function",
                            "function": {
                                "name": "t2i_model_generation",
                                "arguments": json.dumps(
                                    {"discrete_image_token": "<|discrete_image_start|><|vision1|>"}
                                ),
                            },
                        }
                    ],
                }
            ),
        )
        [out] = run(srv)
        assert len(srv.of("image")) == 3
    assert out.failures == {} and out.usage["image_attempts"] == 3
    errors = out.usage["image_attempt_errors"]
    assert "did not call the t2i_model_generation tool" in errors[0]
    assert "vision decoding failed" in errors[1]


def test_no_tool_call_at_all_is_backbone_no_image() -> None:
    with FakeOmniServe() as srv:
        srv.script("image", *[Reply(message={"content": "no"})] * 2)
        [out] = run(srv, image_attempts=2)
    assert out.failures["image"].category == "backbone_no_image"
    assert out.text and out.speech is not None


def test_unsigned_storage_location_is_not_retried() -> None:
    message = {
        "content": None,
        "tool_calls": [
            {
                "id": "t",
                "type": "function",
                "function": {
                    "name": "t2i_model_generation",
                    "arguments": json.dumps(
                        {"discrete_image_token": "s3://bucket/vision-decoder/x.png"}
                    ),
                },
            }
        ],
    }
    with FakeOmniServe() as srv:
        srv.script("image", Reply(message=message))
        [out] = run(srv)
        assert len(srv.of("image")) == 1
    assert out.failures["image"].category == "model_error"
    assert "s3://bucket/vision-decoder/x.png" in out.failures["image"].message


def test_narrationless_answer_fails_text_skips_image_keeps_speech() -> None:
    with FakeOmniServe(text="SPEECH: Hurry, Lena!") as srv:
        [out] = run(srv)
        assert srv.of("image") == [] and len(srv.of("speech")) == 1
    assert out.text is None and out.image is None and out.speech is not None
    assert out.failures["text"].category == "backbone_no_text"
    assert "no NARRATION" in out.failures["text"].message
    assert out.failures["image"] == Failure(
        "upstream_failed", "image skipped: no narration available"
    )
    assert "speech" not in out.failures


def test_no_speech_line_fails_only_speech_and_sends_no_speech_request() -> None:
    with FakeOmniServe(text="NARRATION: Pip knocked.\nHe waited.") as srv:
        [out] = run(srv)
        assert srv.of("speech") == []
    assert out.text == "Pip knocked." and out.image is not None and out.speech is None
    assert set(out.failures) == {"speech"}
    assert out.failures["speech"].category == "backbone_no_speech"


def test_empty_answer_is_empty_output() -> None:
    with FakeOmniServe(text="<think>only thoughts</think>") as srv:
        [out] = run(srv)
    assert out.failures["text"].category == "empty_output"
    assert out.failures["image"].category == "upstream_failed"
    assert out.failures["speech"].category == "backbone_no_speech"


def test_missing_audio_is_backbone_no_speech() -> None:
    with FakeOmniServe() as srv:
        srv.script("speech", Reply(message={"content": "I can only type."}))
        [out] = run(srv)
    assert out.failures["speech"] == Failure("backbone_no_speech", "the model returned no audio")


def test_429_retry_after_is_honoured() -> None:
    with FakeOmniServe() as srv:
        srv.script("text", Reply(status=429, headers={"Retry-After": "1"}))
        [out] = run(srv)
        first, second = srv.of("text")
    assert second.at - first.at >= 0.95
    assert out.failures == {} and out.usage["requests"] == 4
    assert out.usage["retry_wait_s"] == 1.0


def test_server_error_retried_then_whole_example_fails() -> None:
    with FakeOmniServe() as srv:
        srv.script("text", *[Reply(status=500)] * 3)
        [out] = run(srv, max_retries=2)
        assert len(srv.of("text")) == 3 and srv.of("image") == []
    assert isinstance(out, Failure) and out.category == "model_error"
    assert out.message.startswith("text request failed: HTTP 500")
    assert "(3 attempts)" in out.message and "image_transport=http" in out.message


def test_timeout_is_a_timeout_failure() -> None:
    with FakeOmniServe() as srv:
        srv.script("text", Reply(delay_s=1.5))
        [out] = run(srv, timeout_s=0.3, max_retries=0)
    assert isinstance(out, Failure) and out.category == "timeout"
    assert out.message.startswith("text request failed:")


def test_bad_request_image_not_retried() -> None:
    with FakeOmniServe() as srv:
        srv.script("image", Reply(status=400))
        [out] = run(srv)
        assert len(srv.of("image")) == 1
    assert out.failures["image"].category == "model_error"
    assert out.failures["image"].message.startswith("image request failed: HTTP 400")


def test_bounded_concurrency_and_order() -> None:
    items = demo_planner_items(4)
    with FakeOmniServe() as srv:
        srv.script(
            "text", *[Reply(delay_s=0.2, text=f"NARRATION: n{i}.\nSPEECH: s{i}!") for i in range(4)]
        )
        outs = run(srv, items, max_concurrency=2)
        peak = srv.peak_in_flight
    assert 1 <= peak <= 2
    assert all(isinstance(o, BackboneOutput) and not o.failures for o in outs)
    assert sorted(o.text for o in outs) == ["n0.", "n1.", "n2.", "n3."]


def test_api_key_absent_sends_a_placeholder_not_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMNISTORY_HYPERCLOVA_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unrelated-openai-key")
    with FakeOmniServe() as srv:
        run(srv)
        auth = {r.headers.get("authorization") for r in srv.requests}
    assert auth == {"Bearer not-needed"}


def test_http_image_transport(tmp_path: Path) -> None:
    root = tmp_path / "served"
    (root / "pages dir").mkdir(parents=True)
    page = root / "pages dir" / "p 1.png"
    page.write_bytes(png_bytes(8))
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(png_bytes(8))
    item = {**demo_planner_items(1)[0], "current_image": Media(str(page), "x")}
    stray = {**item, "current_image": Media(str(outside), "y")}
    with FakeOmniServe() as srv:
        outs = run(
            srv,
            [item, stray],
            image_transport="http",
            image_http_root=str(root),
            image_base_url="http://pages.local:8080/root/",
        )
        urls = [
            r.body["messages"][-1]["content"][0]["image_url"]["url"]
            for r in srv.requests
            if r.kind in ("text", "image")
        ]
    assert set(urls) == {"http://pages.local:8080/root/pages%20dir/p%201.png"}
    assert isinstance(outs[1], Failure) and "is not under image_http_root" in outs[1].message


def test_stereo_speech_is_mixed_to_mono() -> None:
    from hcx_fake_omniserve import wav_bytes
    from omnistory_hyperclova.media import read_audio

    audio = read_audio(wav_bytes(channels=2, rate=8000))
    assert audio.samples.ndim == 1 and audio.sample_rate == 8000


def test_inline_audio_bytes_are_accepted() -> None:
    from hcx_fake_omniserve import wav_bytes

    data = base64.b64encode(wav_bytes()).decode()
    with FakeOmniServe() as srv:
        srv.script(
            "speech",
            Reply(
                message={
                    "content": "x",
                    "audio": {
                        "id": "a",
                        "data": data,
                        "transcript": "x",
                        "expires_at": int(time.time()),
                    },
                }
            ),
        )
        [out] = run(srv)
        assert all(not p.endswith(".wav") for p, _ in srv.media_requests)
    assert out.speech is not None and out.failures == {}


def test_reasoning_split_off_by_the_server_is_counted_not_parsed() -> None:
    with FakeOmniServe() as srv:
        srv.script(
            "text",
            Reply(
                message={
                    "content": "NARRATION: a.\nSPEECH: b!",
                    "reasoning_content": "NARRATION: draft",
                }
            ),
        )
        [out] = run(srv)
    assert (out.text, out.usage["speech_line"]) == ("a.", "b!")
    assert out.usage["reasoning_chars"] == len("NARRATION: draft")
