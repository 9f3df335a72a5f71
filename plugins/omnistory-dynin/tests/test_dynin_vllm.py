"""The vllm_omni backend through the real openai SDK against a local stand-in server on 127.0.0.1,
and backbone.launch=true with a fake `vllm` executable on PATH (dynin_fake_omni.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from dynin_fake_omni import NARRATION, start
from omnistory_dynin.backbone import DyninOmni
from omnistory_dynin.prompts import example_seed
from omnistory_testkit import demo_planner_items

from omnistory_core.api import Audio, BackboneOutput, ComponentError

TESTS = Path(__file__).parent


@pytest.fixture(scope="module")
def items():
    return demo_planner_items(limit=2)


@pytest.fixture
def server():
    srv = start()
    yield srv
    srv.shutdown()
    srv.server_close()


def remote(server, **params) -> DyninOmni:
    return DyninOmni(backend="vllm_omni", base_url=server.base_url, **params)


def posts(server) -> list[dict]:
    return [r["body"] for r in server.records if r["method"] == "POST"]


def test_one_request_per_example_gives_three_modalities(server, items):
    b = remote(server, extra_body={"sampling_params_list": [{"max_tokens": 1}]}, max_concurrency=2)
    outs = b.run_batch(items)
    for out in outs:
        assert isinstance(out, BackboneOutput) and out.failures == {}
        assert out.text == NARRATION
        assert out.image.size == (48, 48)
        assert isinstance(out.speech, Audio) and out.speech.sample_rate == 24000
        assert out.usage["returned"] == {"text": 1, "image": 1, "audio": 1}
        assert out.usage["prompt_tokens"] == 900 and out.usage["requests"] == 1
    bodies = sorted(posts(server), key=lambda body: body["seed"])
    assert len(bodies) == 2
    assert sorted(b["seed"] for b in bodies) == sorted(example_seed(20261006, i) for i in items)
    for body in bodies:
        assert body["model"] == "snu-aidas/Dynin-Omni_nips"
        assert body["modalities"] == ["text", "image", "audio"]
        assert body["sampling_params_list"] == [{"max_tokens": 1}]  # extra_body, top level
        (message,) = body["messages"]
        image, text = message["content"]
        assert image["type"] == "image_url"
        assert image["image_url"]["url"].startswith("data:image/png;base64,")
        assert "exactly one line of character dialogue" in text["text"]
    b.unload()


def test_a_missing_modality_fails_alone_or_takes_the_example(server, items):
    server.mode = "no_audio"
    out = remote(server, all_or_nothing=False).run_one(items[0])
    assert out.text == NARRATION and out.image is not None and out.speech is None
    assert set(out.failures) == {"speech"}
    assert out.failures["speech"].category == "backbone_no_speech"
    out = remote(server).run_one(items[0])
    assert (out.text, out.image, out.speech) == (None, None, None)
    assert {f.category for f in out.failures.values()} == {"backbone_no_speech"}
    server.mode = "image_placeholder"  # the "no images were produced" text is not narration
    out = remote(server, all_or_nothing=False).run_one(items[0])
    assert out.text == NARRATION and out.image is None and out.speech is not None
    assert out.failures["image"].category == "backbone_no_image"


def test_server_errors_are_retried_then_fail_the_example(server, items):
    server.fail_first = 1
    out = remote(server, max_retries=1).run_one(items[0])
    assert out.failures == {} and out.usage["requests"] == 2
    server.fail_first = 5
    with pytest.raises(ComponentError, match="HTTP 503") as info:
        remote(server, max_retries=0).run_one(items[0])
    assert info.value.category == "model_error"


# -- launch=true ---------------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """`vllm` on PATH: runs the stand-in server (``serve <model> --omni --host --port``)."""
    exe = tmp_path / "bin" / "vllm"
    exe.parent.mkdir()
    exe.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(TESTS)!r})\n"
        "from dynin_fake_omni import main\nsys.exit(main())\n"
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    files = {
        "record": tmp_path / "requests.jsonl",
        "pid": tmp_path / "server.pid",
        "log": tmp_path / "vllm.log",
    }
    monkeypatch.setenv("OMNISTORY_FAKE_OMNI_RECORD", str(files["record"]))
    monkeypatch.setenv("OMNISTORY_FAKE_OMNI_PIDFILE", str(files["pid"]))
    return files


def test_launch_starts_vllm_omni_waits_for_health_and_stops_it(fake_vllm, items, monkeypatch):
    monkeypatch.setenv("OMNISTORY_FAKE_OMNI_STARTUP_S", "1")  # /health answers 503 at first
    b = DyninOmni(
        backend="vllm_omni",
        launch=True,
        launch_args=["--stage-configs-path", "dynin_omni.yaml"],
        launch_log=str(fake_vllm["log"]),
    )
    out = b.run_one(items[0])
    assert out.failures == {} and out.text == NARRATION
    server = b.server
    assert server is not None and server.running
    pid = int(fake_vllm["pid"].read_text())
    assert pid == server.process.pid
    argv = json.loads(fake_vllm["log"].read_text().split("fake vllm: argv ", 1)[1].splitlines()[0])
    assert argv == [
        "serve",
        "snu-aidas/Dynin-Omni_nips",
        "--omni",
        "--host",
        "127.0.0.1",
        "--port",
        str(server.port),
        "--stage-configs-path",
        "dynin_omni.yaml",
    ]
    recorded = [json.loads(line) for line in fake_vllm["record"].read_text().splitlines()]
    assert any(r["path"] == "/health" for r in recorded)
    assert sum(r["path"] == "/v1/chat/completions" for r in recorded) == 1
    assert "launch" not in b.output_params()  # runtime only
    b.unload()
    assert b.server is None and not _alive(pid)


def test_a_failed_launch_fails_fast_and_names_the_log(fake_vllm, items, monkeypatch):
    monkeypatch.setenv("OMNISTORY_FAKE_OMNI_FAIL", "CUDA out of memory (stand-in)")
    b = DyninOmni(backend="vllm_omni", launch=True, launch_log=str(fake_vllm["log"]))
    with pytest.raises(ComponentError, match="exited with status 3") as first:
        b.run_one(items[0])
    assert "CUDA out of memory (stand-in)" in str(first.value)
    assert str(fake_vllm["log"]) in str(first.value)
    with pytest.raises(ComponentError, match="did not start"):
        b.run_one(items[0])  # remembered: no second launch
    assert fake_vllm["log"].read_text().count("CUDA out of memory (stand-in)") == 1
