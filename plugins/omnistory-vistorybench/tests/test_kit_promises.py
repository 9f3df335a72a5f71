"""What CONTRIBUTING promises a plugin author holds on ViStoryBench too: the failure summary at the
end of a run, the did-you-mean line for a bare misspelt parameter, stand-ins composing with the
task's presets (``image/copy_paste`` and a wrapper's inner expert included), and the model
libraries' loading reports kept out of the console unless ``--verbose``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from omnistory_testkit import run_cli
from omnistory_testkit.standins import make_standin_site
from omnistory_vistorybench.dataset import fixture_root
from omnistory_vistorybench.offline import offline_metric_params

QUIET = ("engine.progress=false",)


def _console(proc) -> str:
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy_paste run over a copy of the fixture whose one reference image does not decode:
    the shots showing that character fail, the others are written."""
    root = tmp_path_factory.mktemp("broken")
    stories = root / "ViStory"
    shutil.copytree(fixture_root() / "ViStory", stories)
    (stories / "01" / "image" / "Chelsea" / "00.jpg").write_bytes(b"not an image")
    proc = run_cli(
        "system=copy_paste",
        "dataset=vistory_fixture",
        f"dataset.root={stories}",
        "output_root=out",
        *QUIET,
        cwd=root,
    )
    assert proc.returncode == 0, _console(proc)[-3000:]
    return root / "out" / "runs" / "vistory_fixture" / "copy_paste", _console(proc)


def test_a_run_ends_with_the_failure_summary_by_category(broken_run) -> None:
    job, console = broken_run
    rows = [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r["status"] != "ok"]
    assert failed and len(failed) < len(rows), rows
    lines = console.splitlines()
    at = next(i for i, line in enumerate(lines) if "failures: " in line)
    assert (
        f"failures: {len(failed)} of {len(rows)} outputs missing (image {len(failed)})"
        in (lines[at])
    )
    # per category: its count, the cause and where the component's code broke
    detail = lines[at + 1]
    assert "image" in detail and f"model_error     {len(failed)}" in detail, detail
    assert "UnidentifiedImageError" in detail and "omnistory_vistorybench/experts.py:" in detail
    # nothing but the summary after it: it is the run's last word
    assert all(
        "failures" in line or line.startswith(" ") or "  image" in line for line in lines[at:]
    )


def test_a_bare_misspelt_parameter_gets_the_did_you_mean_line(tmp_path: Path) -> None:
    proc = run_cli(
        "system=copy_paste", "dataset=vistory_fixture", "sizee=128", "output_root=out", cwd=tmp_path
    )
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("omnistory: error: sizee=128: the run has no setting 'sizee'"), line
    assert "did you mean image.size=128?" in line, line
    assert not (tmp_path / "out").exists()


def test_stand_ins_compose_with_the_tasks_presets(tmp_path: Path) -> None:
    site = make_standin_site(tmp_path / "site")
    log = tmp_path / "calls.jsonl"
    env = {"PYTHONPATH": str(site), "OMNISTORY_STANDIN_LOG": str(log)}
    for preset in ("copy_paste", "story_kontext"):
        args = (f"system={preset}", "dataset=vistory_fixture", "output_root=out", *QUIET)
        proc = run_cli(*args, "engine.fail_on_missing=true", cwd=tmp_path, env=env)
        assert proc.returncode == 0, _console(proc)[-3000:]
    jobs = tmp_path / "out" / "runs" / "vistory_fixture"
    for preset in ("copy_paste", "story_kontext"):
        manifest = json.loads((jobs / preset / "manifest.json").read_text())
        assert manifest["components"]["image"]["name"] in (preset, "sequential"), manifest
    # each preset's image expert ran as its stand-in (the wrapper with its parameters)
    called = {json.loads(line)["component"] for line in log.read_text().splitlines()}
    assert called == {"image/copy_paste", "image/sequential"}, called


@pytest.mark.slow
def test_loading_reports_stay_out_of_the_console_unless_verbose(broken_run, tmp_path: Path):
    job, _ = broken_run
    params = offline_metric_params(tmp_path / "weights", ["aesthetic"])["aesthetic"]
    sets = [a for k, v in params.items() for a in ("--set", f"metric.aesthetic.{k}={v}")]
    args = ("evaluate", str(job), "--metrics", "aesthetic", *sets, "--no-report", "--no-progress")
    quiet = run_cli(*args, cwd=tmp_path)
    assert quiet.returncode == 0, _console(quiet)[-3000:]
    assert "UNEXPECTED" not in _console(quiet)
    # another store: the loud run loads the model again instead of reading the quiet one's scores
    loud = run_cli("--verbose", *args, "--store", str(tmp_path / "store-loud"), cwd=tmp_path)
    assert loud.returncode == 0, _console(loud)[-3000:]
    # the tiny SigLIP is loaded from a full checkpoint: transformers reports its text tower
    assert "UNEXPECTED" in _console(loud)
