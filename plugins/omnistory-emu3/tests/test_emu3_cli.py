"""``python -m omnistory_core backbone=emu3 tts=espeak`` end to end on tiny checkpoints: the
three outputs, the failure categories per modality, the cache."""

from __future__ import annotations

import json
from pathlib import Path

from emu3_cli import jsonl, missing, run_cli
from PIL import Image

SYSTEM = "emu3-espeak"


def run_dir(out: Path) -> Path:
    return out / "runs" / "demo" / SYSTEM


def emu3_cli(tmp_path: Path, chat: Path, gen: Path, *extra: str, returncode: int = 0):
    out = tmp_path / "out"
    result = run_cli(
        "backbone=emu3",
        "tts=espeak",
        f"backbone.chat_model={chat}",
        f"backbone.gen_model={gen}",
        "dataset.limit=2",
        "engine.progress=false",
        f"output_root={out}",
        *extra,
        cwd=tmp_path,
    )
    assert result.returncode == returncode, result.stderr[-3000:]
    return run_dir(out), result


def test_text_image_and_speech_from_one_backbone_call(trained_chat, tiny_gen, tmp_path):
    run, _ = emu3_cli(tmp_path, trained_chat, tiny_gen)
    assert (run / "missing.txt").read_text() == ""
    rows = jsonl(run / "records.jsonl")
    assert [(r["text"]["status"], r["image"]["status"], r["speech"]["status"]) for r in rows] == [
        ("ok", "ok", "ok")
    ] * 2
    for index in (0, 1):
        narration = (run / "text" / str(index) / "generated.txt").read_text()
        assert narration == 'Pip ran to the hill. "Come quick!"'
        with Image.open(run / "image" / str(index) / "generated.png") as image:
            assert image.format == "PNG" and image.size == (32, 32)
        assert (run / "speech" / str(index) / "generated.wav").stat().st_size > 1000
    plans = jsonl(run / "plans.jsonl")
    for plan in plans:
        # the official runner's speaker reaches the TTS expert with the model's quote
        assert plan["plan"]["speech"] == {
            "utterance": "Come quick!",
            "speaker": "Narrator",
            "emotion": "neutral",
            "speed": "normal",
            "pitch": "normal",
            "gender": "female",
        }
        assert plan["usage"]["repairs"] == ["quote_appended"]
        assert plan["usage"]["t2i"] == "a small fox at a window"
    manifest = json.loads((run / "manifest.json").read_text())
    backbone = manifest["components"]["backbone"]
    assert backbone["name"] == "emu3" and backbone["distribution"] == "omnistory-emu3"
    assert manifest["paradigm"] == "semi-orchestration (T+I)"
    stats = json.loads((run / "stats.json").read_text())["components"]
    assert stats["backbone/emu3"]["calls"] == 2 and stats["backbone/emu3"]["loads"] == 1
    # both examples get the same utterance and voice: espeak speaks it once
    assert stats["tts/espeak"]["calls"] + stats["tts/espeak"]["cache_hits"] == 2


def test_garbage_answers_fail_all_three_outputs_with_the_parse_category(
    tiny_chat, tiny_gen, tmp_path
):
    # nothing at all was made: the job exits 2 once its records are written
    run, result = emu3_cli(
        tmp_path, tiny_chat, tiny_gen, "backbone.chat_max_new_tokens=32", returncode=2
    )
    assert "every output is missing (text 2, image 2, speech 2)" in result.stderr
    rows = missing(run)
    assert sorted((i, m) for i, m, _ in rows) == [
        (i, m) for i in (0, 1) for m in ("image", "speech", "text")
    ]
    for index in (0, 1):
        categories = {m: c for i, m, c in rows if i == index}
        assert len(set(categories.values())) == 1  # one failure, attributed to every output
        assert categories["text"] in ("plan_json_error", "plan_missing_field")
    assert not list(run.glob("image/*/generated.png"))
    assert not list(run.glob("speech/*/generated.wav"))
    stats = json.loads((run / "stats.json").read_text())["components"]
    assert stats["backbone/emu3"]["failures"] == 2
    assert stats["tts/espeak"]["calls"] == 0


def test_a_failed_image_keeps_text_and_speech_then_the_cache_serves_the_rerun(
    trained_chat, tiny_gen, tmp_path
):
    args = ("backbone.gen_max_new_tokens=5",)
    run, _ = emu3_cli(tmp_path, trained_chat, tiny_gen, *args)
    assert missing(run) == [(0, "image", "model_error"), (1, "image", "model_error")]
    assert "gen_max_new_tokens=5 cannot hold" in (run / "missing.txt").read_text()
    assert (run / "text" / "0" / "generated.txt").read_text().endswith('"Come quick!"')
    assert (run / "speech" / "1" / "generated.wav").exists()

    # a model_error is recomputed by default (engine.retry_failures=errors); =none keeps it
    run, _ = emu3_cli(tmp_path, trained_chat, tiny_gen, *args, "engine.retry_failures=none")
    stats = json.loads((run / "stats.json").read_text())["components"]["backbone/emu3"]
    assert (stats["calls"], stats["cache_hits"], stats["loads"]) == (0, 2, 0)
