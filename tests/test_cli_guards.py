"""Bad input, broken plugins, secrets: clear errors, nothing lost, nothing leaked."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from omnistory_testing import run_cli

from omnistory_core.data import demo_root

QUIET = "engine.progress=false"


def _demo_copy(tmp_path: Path) -> Path:
    root = tmp_path / "release"
    shutil.copytree(demo_root(), root)
    return root


def _edit_parquet(root: Path, row: int, column: str, value) -> str:
    path = root / "data/omni_storybench.parquet"
    df = pd.read_parquet(path)
    df.loc[row, column] = value
    df.to_parquet(path, index=False)
    return str(df.loc[row, "id"])


@pytest.mark.parametrize(
    "column,value,field",
    [
        ("speech_emotion", "furious", "speech_emotion"),
        ("condition_characters", "[{broken json", "condition_characters"),
    ],
)
def test_bad_row_stops_before_generation(tmp_path: Path, column, value, field) -> None:
    root = _demo_copy(tmp_path)
    example_id = _edit_parquet(root, 3, column, value)
    proc = run_cli(
        "dataset=omnistorybench", f"dataset.root={root}", "output_root=out", QUIET, cwd=tmp_path
    )
    assert proc.returncode != 0
    assert "row 3" in proc.stderr and example_id in proc.stderr and field in proc.stderr
    assert not list((tmp_path / "out").rglob("manifest.json"))
    assert not (tmp_path / "out/store/calls").exists() or not list(
        (tmp_path / "out/store/calls").rglob("*.json")
    )


def test_missing_image_stops_a_sweep_before_any_job(tmp_path: Path) -> None:
    root = _demo_copy(tmp_path)
    df = pd.read_parquet(root / "data/omni_storybench.parquet")
    image = root / df.loc[5, "next_image"]
    image.unlink()
    proc = run_cli(
        "-m",
        "planner=template,copy",
        "dataset=omnistorybench",
        f"dataset.root={root}",
        "output_root=out",
        QUIET,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "row 5" in proc.stderr and str(df.loc[5, "id"]) in proc.stderr
    assert "next_image" in proc.stderr
    assert "Launching" not in proc.stdout + proc.stderr, "a job started"
    assert not list((tmp_path / "out").rglob("manifest.json"))


@pytest.mark.parametrize(
    ("setting", "unknown"),
    [
        ("evaluation.metrics=[bertscore,bertscor]", "metric named 'bertscor'"),
        ("evaluation.judges=[panel_a,text-qwen3]", "judge named 'text-qwen3'"),
    ],
)
def test_an_unknown_evaluator_stops_a_sweep_before_any_job(
    tmp_path: Path, setting: str, unknown: str
) -> None:
    # a typo in the end-of-sweep evaluation must not cost the whole generation first
    proc = run_cli("-m", "planner=template,copy", setting, "output_root=out", QUIET, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("omnistory: error:")]
    assert len(errors) == 1 and unknown in errors[0], proc.stderr[-2000:]
    assert "Launching" not in proc.stdout + proc.stderr, "a job started"
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("manifest.json"))


def _fake_distribution(site: Path, dist: str, version: str, module: str, body: str) -> None:
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[omnistory]\n{module} = {module}\n")
    (info / "RECORD").write_text("")
    (site / f"{module}.py").write_text(textwrap.dedent(body))


def test_broken_plugin_is_one_warning_line_and_others_work(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _fake_distribution(
        site,
        "omnistory-broken",
        "9.9.9",
        "omnistory_broken_plugin",
        "import a_module_that_does_not_exist\n",
    )
    env = {"PYTHONPATH": str(site)}
    proc = run_cli("plugins", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1
    assert "omnistory-broken 9.9.9" in warnings[0]
    assert "a_module_that_does_not_exist" in warnings[0]
    listed = {p["plugin"]: p for p in json.loads(proc.stdout)}
    assert listed["omnistory_broken_plugin"]["error"].startswith("ModuleNotFoundError")
    assert "template" in listed["builtin"]["registers"]["planner"]

    run = run_cli("dataset.limit=2", "output_root=out", QUIET, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr

    strict = run_cli("plugins", cwd=tmp_path, env={**env, "OMNISTORY_STRICT_PLUGINS": "1"})
    assert strict.returncode != 0 and "Traceback" in strict.stderr

    blocked = run_cli(
        "plugins",
        "--json",
        cwd=tmp_path,
        env={**env, "OMNISTORY_BLOCK_PLUGINS": "omnistory-broken"},
    )
    assert "WARNING" not in blocked.stderr
    assert (
        "blocked"
        in {p["plugin"]: p for p in json.loads(blocked.stdout)}["omnistory_broken_plugin"]["error"]
    )


def test_installed_example_plugin_adds_planner_and_preset(tmp_path: Path) -> None:
    proc = run_cli("plugins", "--json", cwd=tmp_path)
    listed = {p["plugin"]: p for p in json.loads(proc.stdout)}
    assert listed["example_planner"]["registers"]["planner"] == ["instruction"]
    assert listed["example_planner"]["distribution"] == "omnistory-example-planner"
    run = run_cli(
        "system=instruction_copy_espeak", "dataset.limit=2", "output_root=out", QUIET, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    manifest = json.loads(
        (tmp_path / "out/runs/demo/instruction_copy_espeak/manifest.json").read_text()
    )
    assert manifest["components"]["planner"]["distribution"] == "omnistory-example-planner"
    assert manifest["paradigm"] == "baseline"


CANARY = "sk-canary-3f9a1c7e5b2d4a6f8e0c"


def test_api_key_never_reaches_the_output_root(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": CANARY, "ANTHROPIC_API_KEY": CANARY + "-anthropic"}
    proc = run_cli(
        "-m",
        "planner=template,copy",
        "dataset.limit=3",
        "output_root=out",
        QUIET,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert len(files) > 20
    for path in files:
        assert CANARY.encode() not in path.read_bytes(), path


def test_secret_on_the_command_line_is_refused(tmp_path: Path) -> None:
    proc = run_cli(f"+planner.api_key={CANARY}", "output_root=out", cwd=tmp_path)
    assert proc.returncode == 2
    assert "environment variable" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_config_error_in_one_sweep_job_is_one_line_and_others_finish(tmp_path: Path) -> None:
    proc = run_cli(
        "-m", "planner=template,oracle", "dataset.limit=2", "output_root=out", QUIET, cwd=tmp_path
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "omnistory: error: oracle-copy-espeak:" in proc.stderr
    assert "allow_oracle=true" in proc.stderr
    sweep = tmp_path / "out/sweeps/demo"
    assert (sweep / "template-copy-espeak/manifest.json").exists()
    stats = json.loads((sweep / "sweep_stats.json").read_text())
    assert [j["system_id"] for j in stats["failed_jobs"]] == ["oracle-copy-espeak"]
    assert (sweep / "report/index.html").exists()


def test_config_error_in_a_single_run_exits_2_without_traceback(tmp_path: Path) -> None:
    proc = run_cli("image=oracle", "output_root=out", QUIET, cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "allow_oracle=true" in proc.stderr
