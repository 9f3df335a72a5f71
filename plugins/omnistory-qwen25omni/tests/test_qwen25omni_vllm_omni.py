"""The vllm_omni backend against a local vLLM-Omni stand-in, through the real ``openai`` SDK.

The stand-in (qwen25omni_fake_server.py) answers chat completions as vLLM-Omni answers for
Qwen2.5-Omni: a text choice plus, when audio is requested, a choice with a base64 WAV (24 kHz).
"""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
import soundfile as sf
from omnistory_qwen25omni.backbone import Qwen25OmniBackbone
from omnistory_qwen25omni.prompts import SYSTEM_PROMPT
from omnistory_testkit import run_cli
from qwen25omni_fake_server import (
    IMAGE_PROMPT,
    NARRATION,
    QUOTE,
    FakeOmniServer,
    Turn,
    tone,
)

from omnistory_core.api import ComponentError

MODEL = "Qwen/Qwen2.5-Omni-7B"


@pytest.fixture
def server():
    with FakeOmniServer(served_model=MODEL) as s:
        yield s


def omni(server: FakeOmniServer, **params) -> Qwen25OmniBackbone:
    backbone = Qwen25OmniBackbone(
        backend="vllm_omni", base_url=server.base_url, max_retries=0, seed=0, **params
    )
    backbone.load()
    return backbone


def _parts(message, kind):
    return [p for p in message["content"] if p["type"] == kind]


def test_two_requests_with_the_official_structure(server, demo_items):
    b = omni(server)
    out = b.run_one(demo_items[0])
    b.unload()
    assert out.failures == {}
    assert out.text == NARRATION and out.plan == {"image_prompt": IMAGE_PROMPT}
    first, second = server.chats()
    # pass 1: text + audio out; system prompt, instructions, then the picture alone
    assert first["modalities"] == ["text", "audio"] and first["model"] == MODEL
    assert isinstance(first["seed"], int) and first["seed"] == second["seed"]
    system, instructions, picture = first["messages"]
    assert system == {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]}
    assert "exactly one short line of dialogue" in instructions["content"][0]["text"]
    (image,) = _parts(picture, "image_url")
    url = image["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == demo_items[0]["current_image"].read_bytes()
    # pass 2: text only; the line as text and the pass-1 WAV as input_audio, then the picture
    assert second["modalities"] == ["text"]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "user", "user"]
    assert second["messages"][1]["content"][0]["text"].endswith(f"- {QUOTE}")
    line = second["messages"][2]
    assert _parts(line, "text")[0]["text"] == f"The line of dialogue as text: {QUOTE}"
    (audio,) = _parts(line, "input_audio")
    assert audio["input_audio"]["format"] == "wav"
    assert base64.b64decode(audio["input_audio"]["data"]) == server.wav  # the server's own bytes
    assert _parts(second["messages"][3], "image_url")[0]["image_url"]["url"] == url
    assert out.usage["tokens"] == {
        "pass1": {"prompt": 321, "completion": 12},
        "pass2": {"prompt": 321, "completion": 12},
    }
    assert out.usage["totals"] == {"prompt_tokens": 642, "completion_tokens": 24}


def test_audio_is_decoded_at_24_khz(server, demo_items):
    b = omni(server)
    out = b.run_one(demo_items[0])
    b.unload()
    assert out.speech.sample_rate == 24000
    np.testing.assert_allclose(out.speech.samples, tone(), atol=1 / 32767 + 1e-6)


def test_server_error_in_pass2_fails_the_text_only(server, demo_items):
    server.queue(Turn(), Turn(status=500, message="engine dead"))
    b = omni(server)
    out = b.run_one(demo_items[0])
    b.unload()
    assert out.text is None and out.plan is None
    assert out.failures["text"].category == "model_error"
    assert (
        "HTTP 500" in out.failures["text"].message and "engine dead" in out.failures["text"].message
    )
    assert out.speech is not None and out.speech.sample_rate == 24000


def test_server_error_in_pass1_fails_the_example(server, demo_items):
    server.queue(Turn(status=503, message="overloaded"))
    b = omni(server, max_concurrency=1)  # in order: the error meets the first example
    results = b.run_batch(demo_items[:2])
    b.unload()
    assert isinstance(results[0], ComponentError) and "HTTP 503" in str(results[0])
    assert results[1].failures == {}  # the next example is unaffected


def test_no_audio_is_a_speech_failure_and_pass2_goes_on_without_it(server, demo_items):
    server.queue(Turn(audio=False))
    b = omni(server)
    out = b.run_one(demo_items[0])
    b.unload()
    assert out.speech is None
    assert out.failures["speech"].category == "backbone_no_speech"
    assert "cannot force speech" in out.failures["speech"].message
    assert out.text == NARRATION and set(out.failures) == {"speech"}
    second = server.chats()[1]
    assert not any(_parts(m, "input_audio") for m in second["messages"])


def test_bad_json_in_pass2_fails_the_text_and_keeps_the_speech(server, demo_items):
    server.queue(Turn(), Turn(text="The next page is lovely."))
    b = omni(server)
    out = b.run_one(demo_items[0])
    b.unload()
    assert out.failures["text"].category == "plan_json_error"
    assert out.speech is not None and out.text is None


def test_timeouts_are_categorised(demo_items):
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)  # accepts connections, never answers
    port = listener.getsockname()[1]
    try:
        b = Qwen25OmniBackbone(
            backend="vllm_omni",
            base_url=f"http://127.0.0.1:{port}/v1",
            max_retries=0,
            timeout_s=0.5,
            seed=0,
        )
        b.load()
        with pytest.raises(ComponentError) as info:
            b.run_one(demo_items[0])
        b.unload()
    finally:
        listener.close()
    assert info.value.category == "timeout"


def test_concurrent_examples_keep_their_order(server, demo_items):
    b = omni(server, max_concurrency=3)
    results = b.run_batch(demo_items[:3])
    b.unload()
    assert [r.failures for r in results] == [{}, {}, {}]
    assert len(server.chats()) == 6


def test_cli_run_records_each_modality_with_its_own_failure(server, tmp_path):
    # example 0: all ok; example 1: pass 1 without audio; example 2: pass 2 without JSON
    server.queue(Turn(), Turn(), Turn(audio=False), Turn(), Turn(), Turn(text="no json here"))
    out = tmp_path / "out"
    proc = run_cli(
        "backbone=qwen25omni",
        "backbone.backend=vllm_omni",
        f"backbone.base_url={server.base_url}",
        "backbone.max_retries=0",
        "image=noop",
        "dataset.limit=3",
        f"output_root={out}",
        "engine.progress=false",
        cwd=str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = out / "runs" / "demo" / "qwen25omni-noop"
    rows = {
        r["index"]: r for r in map(json.loads, (run / "records.jsonl").read_text().splitlines())
    }
    assert [rows[0][m]["status"] for m in ("text", "image", "speech")] == ["ok", "ok", "ok"]
    assert rows[1]["text"]["status"] == "ok" and rows[1]["image"]["status"] == "ok"
    assert rows[1]["speech"]["category"] == "backbone_no_speech"
    assert rows[2]["speech"]["status"] == "ok"
    assert rows[2]["text"]["category"] == "plan_json_error"
    assert rows[2]["image"]["category"] == "upstream_failed"
    assert (run / "text" / "1" / "generated.txt").read_text() == NARRATION
    for i in (0, 2):
        data, rate = sf.read(io.BytesIO((run / "speech" / str(i) / "generated.wav").read_bytes()))
        assert rate == 24000 and len(data) == len(tone())
    missing = (run / "missing.txt").read_text()
    assert "backbone_no_speech" in missing and "plan_json_error" in missing
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["paradigm"] == "semi-orchestration (T+S)"
    params = manifest["components"]["backbone"]["params"]
    assert params["backend"] == "vllm_omni" and "base_url" not in params
