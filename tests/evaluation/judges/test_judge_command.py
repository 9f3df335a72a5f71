"""``judges list`` and ``judges show-prompt`` on the bundled demo dataset."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from judge_test_helpers import make_media
from omnistory_eval.judges import JUDGE_SPECS
from omnistory_eval.judges.command import main
from omnistory_eval.judges.prompts import TEXT_SYSTEM


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_every_judge(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    for judge_id, spec in JUDGE_SPECS.items():
        line = next(row for row in out.splitlines() if row.startswith(judge_id + " "))
        assert spec.checkpoint in line and spec.track in line


def test_show_prompt_with_placeholders(capsys):
    code, out, _ = run(capsys, "show-prompt", "--judge", "text-llama-nemotron-49b", "--index", "1")
    assert code == 0
    assert "----- system -----\n/no_think\n" + TEXT_SYSTEM in out
    assert "<candidate narration: pass --system-dir" in out
    from omnistory_core.data import load_demo

    example = load_demo()[1]
    assert f"    <current_narration>\n    {example.current.text}\n" in out
    assert f"    {example.reference.next_page.text}\n    </ground_truth_next_narration>" in out


def test_show_prompt_official_layout_and_json(capsys, tmp_path):
    from omnistory_core.data import load_demo

    example = load_demo()[2]
    system = tmp_path / "system"
    (system / "text" / "2").mkdir(parents=True)
    (system / "text" / "2" / "generated.txt").write_text("A candidate line.", encoding="utf-8")
    media = make_media(tmp_path / "m")
    for modality, key, name in (
        ("image", "candidate_image", "generated.png"),
        ("speech", "candidate_speech", "generated.wav"),
    ):
        (system / modality / "2").mkdir(parents=True)
        (system / modality / "2" / name).write_bytes(open(media[key], "rb").read())
    code, out, _ = run(
        capsys,
        "show-prompt",
        "--judge",
        "omni-gemma4-12b",
        "--example-id",
        example.id,
        "--system-dir",
        str(system),
        "--json",
    )
    assert code == 0
    rendered = json.loads(out)
    assert rendered["judge"] == "omni-gemma4-12b"
    assert [m["path"] for m in rendered["media"]] == [
        example.current.image,
        example.reference.next_page.image,
        str(system / "image" / "2" / "generated.png"),
        str(system / "speech" / "2" / "generated.wav"),
    ]
    user = rendered["messages"][1]["content"]
    assert "<generated_next_narration>\nA candidate line.\n</generated_next_narration>" in "".join(
        p.get("text", "") for p in user
    )
    assert rendered["json_schema"]["required"][0] == "alignment_with_metadata"


def test_show_prompt_from_a_job_directory(capsys, tmp_path):
    job = tmp_path / "job"
    (job / "text").mkdir(parents=True)
    (job / "text" / "0.txt").write_text("From the job dir.", encoding="utf-8")
    (job / "records.jsonl").write_text(
        json.dumps(
            {
                "index": 0,
                "text": {"status": "ok", "path": "text/0.txt"},
                "image": {"status": "failure"},
            }
        )
        + "\n",
        encoding="utf-8",
    )
    code, out, _ = run(
        capsys, "show-prompt", "--judge", "text-qwen3-30b-a3b", "--system-dir", str(job)
    )
    assert code == 0 and "    From the job dir.\n    </generated_next_narration>" in out
    code, _, err = run(
        capsys, "show-prompt", "--judge", "image-qwen3-vl-32b", "--system-dir", str(job)
    )
    assert code == 2 and "no image output for example" in err


def test_show_prompt_serialized_speech_prompt(capsys):
    code, out, _ = run(capsys, "show-prompt", "--judge", "speech-kimi-audio-7b")
    assert code == 0
    assert (
        "===== serialized prompt (audio passed separately) =====\n<|im_kimia_user_msg_start|>"
        in out
    )
    assert "stop_token_ids: [151644]" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["show-prompt", "--judge", "nope"], "unknown judge 'nope'"),
        (
            ["show-prompt", "--judge", "text-qwen3-30b-a3b", "--index", "999"],
            "no example with index",
        ),
        (
            ["show-prompt", "--judge", "text-qwen3-30b-a3b", "--example-id", "x/y"],
            "no example with id",
        ),
        (
            ["show-prompt", "--judge", "text-qwen3-30b-a3b", "--system-dir", "/nonexistent"],
            "is not a directory",
        ),
    ],
)
def test_user_errors_exit_2_with_a_message(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err


def test_wired_into_the_cli(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "omnistory_core", "judges", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "omni-gemma4-12b" in proc.stdout
