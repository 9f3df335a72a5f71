"""Failures that explain themselves, through the real CLI: a plugin author's bug names its file and
line, and fixing it is enough for the next run; a component that cannot run stops its job with one
line; every run ends with a failure summary, and CI can make missing outputs fatal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from omnistory_testing import load_json, run_cli

QUIET = "engine.progress=false"
PACKAGE = "omnistory_buggy_plugin"

PLUGIN = """
from omnistory_core.hookspecs import hookimpl


@hookimpl
def register_planners(register):
    from omnistory_buggy_plugin.planner import BuggyPlanner

    register(BuggyPlanner)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_buggy_plugin.conf")
"""

PLANNER = """
import json
import os

from omnistory_core.components import Planner, PlannerResponse


class BuggyPlanner(Planner):
    name = "buggy"
    version = "1"
    reads = ("current_text",)

    def run_one(self, item):
        if os.environ.get("BUGGY_PROSE"):
            return PlannerResponse("Here is a lovely next page for your story!")
        weight = page_weight(item["current_text"])
        plan = {
            "narration": f"The story goes on ({weight:.0f}).",
            "image_prompt": "a fox in a meadow",
            "speech": {"speaker": "Pip", "utterance": "Look!", "emotion": "happy",
                       "speed": "normal", "pitch": "normal", "gender": "male"},
        }
        return PlannerResponse(json.dumps(plan))


def page_weight(text):
    return BODY
"""
BUG = "float(text.encode()[:3])"
FIX = "float(len(text))"


def write_plugin(site: Path, body: str) -> None:
    """A distribution as pip would leave it: metadata with the entry point, a package, a yaml."""
    info = site / "omnistory_buggy-0.1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: omnistory-buggy\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[omnistory]\nbuggy = {PACKAGE}\n")
    (info / "RECORD").write_text("")
    conf = site / PACKAGE / "conf" / "planner"
    conf.mkdir(parents=True, exist_ok=True)
    (site / PACKAGE / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    (site / PACKAGE / "conf" / "__init__.py").write_text("")
    (conf / "buggy.yaml").write_text("name: buggy\n")
    (site / PACKAGE / "planner.py").write_text(PLANNER.replace("BODY", body))


def bug_line() -> int:
    return next(n for n, line in enumerate(PLANNER.splitlines(), 1) if "BODY" in line)


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(tmp_path / "site"), "PYTHONDONTWRITEBYTECODE": "1", **env}
    return run_cli(
        "planner=buggy", "dataset.limit=2", "output_root=out", QUIET, *args, cwd=tmp_path, env=env
    )


JOB = Path("out/runs/demo/buggy-copy-espeak")


def planner_calls(tmp_path: Path) -> int:
    return load_json(tmp_path / JOB / "stats.json")["components"]["planner/buggy"]["calls"]


def test_a_bug_names_its_file_and_line_and_fixing_it_is_enough(tmp_path: Path) -> None:
    write_plugin(tmp_path / "site", BUG)
    proc = run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    where = f"{PACKAGE}/planner.py:{bug_line()}"
    job = tmp_path / JOB
    missing = (job / "missing.txt").read_text().splitlines()
    text_lines = [line for line in missing if line.split("\t")[1] == "text"]
    assert len(text_lines) == 2
    for line in text_lines:
        assert "ValueError: could not convert string to float: b'" in line
        assert line.endswith(f"(at {where})"), line
    rows = [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines()]
    assert [r["text"]["exception"] for r in rows] == ["ValueError", "ValueError"]
    assert [r["text"]["where"] for r in rows] == [where, where]
    log = (job / "omnistory.log").read_text()
    assert "failures: 4 of 6 outputs missing (text 2, image 0, speech 2)" in log
    assert "ValueError: could not convert string to float" in log and where in log
    assert where in proc.stdout + proc.stderr  # the console shows the same summary

    # the author fixes the code (no version bump) ...
    write_plugin(tmp_path / "site", FIX)
    # ... retry_failures=none keeps every stored failure
    kept = run(tmp_path, "engine.retry_failures=none")
    assert kept.returncode == 0, kept.stderr
    assert planner_calls(tmp_path) == 0 and len((job / "missing.txt").read_text().splitlines()) == 4
    # ... and a plain re-run recomputes the crashed calls: every output is there
    fixed = run(tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert planner_calls(tmp_path) == 2
    assert (job / "missing.txt").read_text() == ""
    assert (job / "text/0/generated.txt").read_text().startswith("The story goes on (")
    assert (job / "speech/1/generated.wav").is_file()
    assert "failures: none (6 of 6 outputs present)" in fixed.stdout + fixed.stderr


def test_an_unparseable_plan_stays_cached_until_retry_all_and_ci_can_fail(tmp_path: Path) -> None:
    write_plugin(tmp_path / "site", FIX)
    prose = run(tmp_path, BUGGY_PROSE="1")
    assert prose.returncode == 0, prose.stderr  # by default missing outputs are not an error
    console = prose.stdout + prose.stderr
    assert "failures: 4 of 6 outputs missing (text 2, image 0, speech 2)" in console
    summary = [line.split(" - ", 1)[-1].split() for line in console.splitlines()]
    assert ["text", "plan_json_error", "2"] in [words[:3] for words in summary]
    assert ["speech", "plan_json_error", "2"] in [words[:3] for words in summary]
    job = tmp_path / JOB
    assert all(
        line.split("\t")[2] == "plan_json_error"
        for line in (job / "missing.txt").read_text().splitlines()
    )

    # CI: engine.fail_on_missing=true turns any missing output into a non-zero exit
    ci = run(tmp_path, "engine.fail_on_missing=true", BUGGY_PROSE="1")
    assert ci.returncode != 0
    assert "4 output(s) missing" in ci.stderr and "engine.fail_on_missing=true" in ci.stderr
    assert "Traceback" not in ci.stderr
    assert (job / "manifest.json").is_file()  # the outputs are written all the same

    # the planner now writes plans, but an unparseable plan is deterministic: it stays cached
    again = run(tmp_path)
    assert again.returncode == 0, again.stderr
    assert planner_calls(tmp_path) == 0
    assert len((job / "missing.txt").read_text().splitlines()) == 4
    # retry_failures=all recomputes it
    retried = run(tmp_path, "engine.retry_failures=all")
    assert retried.returncode == 0, retried.stderr
    assert planner_calls(tmp_path) == 2 and (job / "missing.txt").read_text() == ""
    passing = run(tmp_path, "engine.fail_on_missing=true")
    assert passing.returncode == 0, passing.stderr


def test_unknown_retry_mode_is_one_line(tmp_path: Path) -> None:
    proc = run_cli(
        "engine.retry_failures=sometimes", "dataset.limit=1", "output_root=out", QUIET, cwd=tmp_path
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "engine.retry_failures must be one of errors, all, none" in proc.stderr


def without(*names: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in names}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def test_gpt_without_a_key_fails_its_job_before_any_example(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "planner=gpt",
            "dataset.limit=2",
            "output_root=out",
            QUIET,
        ],
        cwd=tmp_path,
        env=without("OPENAI_API_KEY"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, proc.stderr
    line = errors[0]
    assert "planner=gpt cannot run" in line and "OPENAI_API_KEY is not set" in line
    assert "export OPENAI_API_KEY=" in line  # the remedy
    # no example was processed: no call in the store, no outputs
    assert not list((tmp_path / "out").rglob("calls/*/*.json"))
    assert not list((tmp_path / "out").rglob("missing.txt"))

    # in a sweep the job is recorded and the others run; the sweep exits 1 at the end
    sweep = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "-m",
            "planner=gpt,template",
            "dataset.limit=2",
            "output_root=out",
            QUIET,
            "evaluation.report=false",
        ],
        cwd=tmp_path,
        env=without("OPENAI_API_KEY"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert sweep.returncode == 1, sweep.stderr
    root = tmp_path / "out/sweeps/demo"
    assert (root / "template-copy-espeak/manifest.json").is_file()
    error = load_json(root / "gpt-copy-espeak/job_error.json")
    assert error["error"].startswith("ComponentUnavailable: planner=gpt cannot run")
    assert not (root / "gpt-copy-espeak/missing.txt").exists()


def test_a_run_that_made_nothing_exits_non_zero(tmp_path: Path) -> None:
    write_plugin(tmp_path / "site", BUG)
    # noop image reads the plan's image_prompt: with every plan broken, nothing at all is made
    proc = run(tmp_path, "image=noop")
    assert proc.returncode != 0
    assert "every output is missing (text 2, image 2, speech 2)" in proc.stderr
    assert "Traceback" not in proc.stderr
    job = tmp_path / "out/runs/demo/buggy-noop-espeak"
    assert (job / "manifest.json").is_file() and len(
        (job / "missing.txt").read_text().splitlines()
    ) == 6
    write_plugin(tmp_path / "site", FIX)
    fixed = run(tmp_path, "image=noop")
    assert fixed.returncode == 0, fixed.stderr
