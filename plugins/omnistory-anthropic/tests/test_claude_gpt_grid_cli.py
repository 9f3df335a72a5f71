"""The user's grid shape with the API planners pointed at a local server:

    python -m omnistory_core -m planner=claude,gpt image=copy tts=espeak dataset.limit=2 \\
        ++planner.base_url=http://127.0.0.1:PORT/v1

One FakeServer speaks both wire protocols (Anthropic Messages and OpenAI Chat Completions),
so the single base-URL override reaches each planner's own endpoint.  The overrides use ``++``:
in a multirun Hydra first composes the config with the *default* planner (``template``, which has
no ``base_url``), and a plain ``planner.base_url=`` is rejected there before any job starts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omnistory_testkit import FakeServer, files_containing, run_cli

pytest.importorskip("omnistory_openai", reason="the grid needs the omnistory-openai plugin too")

KEY_VAR = "OMNI_GRID_CLI_CANARY"  # not secret-looking, so no scrubber can hide a leak
KEY = "sk-canary-grid-31c4d5e6f7"


def test_planner_grid_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with FakeServer() as srv:
        proc = run_cli(
            "-m",
            "planner=claude,gpt",
            "image=copy",
            "tts=espeak",
            "dataset.limit=2",
            f"++planner.base_url={srv.openai_base_url}",
            f"++planner.api_key_env={KEY_VAR}",
            f"output_root={out}",
            "engine.progress=false",
            cwd=str(tmp_path),
            env={KEY_VAR: KEY},
        )
        messages, chats = srv.requests_for("messages"), srv.requests_for("chat")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(messages) == 2 and {r.body["model"] for r in messages} == {"claude-opus-4-7"}
    assert len(chats) == 2 and {r.body["model"] for r in chats} == {"gpt-5.4"}

    sweep = out / "sweeps" / "demo"
    for job_name, planner in (("claude-copy-espeak", "claude"), ("gpt-copy-espeak", "gpt")):
        job = sweep / job_name
        manifest = json.loads((job / "manifest.json").read_text())
        assert manifest["components"]["planner"]["name"] == planner
        assert manifest["missing"] == {"text": 0, "image": 0, "speech": 0}
        for i in (0, 1):
            assert (job / "text" / str(i) / "generated.txt").read_text().strip()
            assert (job / "image" / str(i) / "generated.png").stat().st_size > 0
            assert (job / "speech" / str(i) / "generated.wav").stat().st_size > 0
    assert json.loads((sweep / "sweep_stats.json").read_text())["jobs"] == 2
    assert files_containing(str(out), KEY) == []
    assert KEY not in proc.stdout and KEY not in proc.stderr
