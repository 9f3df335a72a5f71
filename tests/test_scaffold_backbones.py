"""``plugin new NAME --kind backbone --produces ...``: each shape (any-to-any, T+I, T+S) gets its
own wiring, installs and passes its own generated tests; the files every plugin gets (the
``.gitignore``, the ``test`` extra); ``--produces`` refused in one line where it cannot apply."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from omnistory_testkit import run_cli

ROOT = Path(__file__).resolve().parents[1]
#: --produces -> (component name, its preset, the expert override the preset adds, paradigm)
SHAPES = {
    "text,image,speech": ("tiny_omni", "tiny_omni", None, "any-to-any"),
    "text,image": ("tiny_ti", "tiny_ti_espeak", "tts: espeak", "semi-orchestration (T+I)"),
    "text,speech": ("tiny_ts", "tiny_ts_copy", "image: copy", "semi-orchestration (T+S)"),
}


def _dist(made: Path, name: str) -> Path:
    return made / ("omnistory-" + name.replace("_", "-"))


def _run(cmd: list[str], cwd: Path, site: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # only the installed copies: never this checkout's folders, never the plugins' src/
    env.pop("PYTHONPATH", None)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The three shapes scaffolded and installed into one target folder (no venv: it goes on
    PYTHONPATH, where the entry points are found like any installed distribution's); returns
    (the folder holding the distributions, the target)."""
    root = tmp_path_factory.mktemp("backbones")
    made, site = root / "made", root / "site"
    for produces, (name, *_rest) in SHAPES.items():
        proc = run_cli(
            "plugin", "new", name, "--kind", "backbone", "--produces", produces,
            "--dir", str(made), cwd=root,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert f"produces {produces}" in proc.stdout, proc.stdout
    dists = [str(_dist(made, name)) for name, *_rest in SHAPES.values()]
    proc = _run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(site), *dists],
        root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return made, site


@pytest.mark.slow
@pytest.mark.parametrize("produces", list(SHAPES))
def test_each_backbone_shape_installs_and_passes_its_own_tests(
    produces: str, installed: tuple[Path, Path], tmp_path: Path
) -> None:
    made, site = installed
    name, preset, _expert, paradigm = SHAPES[produces]
    dist = _dist(made, name)
    where = _run(
        [sys.executable, "-c", f"import omnistory_{name} as m; print(m.__file__)"], dist, site
    )
    assert where.returncode == 0 and str(site) in where.stdout, where  # the installed copy

    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"]
    tests = _run(pytest_cmd, dist, site)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "2 passed" in tests.stdout and "skipped" not in tests.stdout, tests.stdout

    # the preset the README names runs from the installed copy, with the shape's paradigm
    run = _run(
        [sys.executable, "-m", "omnistory_core", f"system={preset}", "dataset.limit=1",
         "output_root=out", "engine.progress=false", "engine.fail_on_missing=true"],
        tmp_path,
        site,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    manifest = json.loads((tmp_path / "out/runs/demo" / preset / "manifest.json").read_text())
    assert manifest["paradigm"] == paradigm
    assert manifest["components"]["backbone"]["name"] == name


@pytest.mark.parametrize("produces", list(SHAPES))
def test_each_shape_declares_its_produces_preset_and_plan(produces: str, tmp_path: Path) -> None:
    name, preset, expert, _paradigm = SHAPES[produces]
    proc = run_cli(
        "plugin", "new", name, "--kind", "backbone", "--produces", produces, cwd=tmp_path
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    dist = _dist(tmp_path, name)
    package = dist / "src" / f"omnistory_{name}"
    code = (package / "backbone.py").read_text()
    made = ", ".join(f'"{m}"' for m in produces.split(","))
    assert f"produces = frozenset({{{made}}})" in code
    # the plan fields of what the backbone leaves to an expert, and only those
    assert ('plan={"speech": speech}' in code) == ("speech" not in produces)
    assert ('plan={"image_prompt": prompt}' in code) == ("image" not in produces)
    yaml = (package / "conf" / "system" / f"{preset}.yaml").read_text()
    assert f"override /backbone: {name}" in yaml and f"system_id: {preset}" in yaml
    overrides = [line for line in yaml.splitlines() if line.startswith("  - override /")]
    assert overrides == [f"  - override /backbone: {name}"] + (
        [f"  - override /{expert}"] if expert else []
    )
    readme = (dist / "README.md").read_text()
    assert f"system={preset}" in readme
    if expert:
        assert expert.replace(": ", "=") in readme  # the run line names the expert
        assert expert.replace(": ", "=") in proc.stdout


def test_any_to_any_is_the_default_shape(tmp_path: Path) -> None:
    assert run_cli("plugin", "new", "plain", "--kind", "backbone", cwd=tmp_path).returncode == 0
    assert run_cli(
        "plugin", "new", "explicit", "--kind", "backbone", "--produces", "speech,image,text",
        cwd=tmp_path,
    ).returncode == 0  # fmt: skip
    plain = (tmp_path / "omnistory-plain/src/omnistory_plain/backbone.py").read_text()
    explicit = (tmp_path / "omnistory-explicit/src/omnistory_explicit/backbone.py").read_text()
    assert plain.replace("plain", "explicit").replace("Plain", "Explicit") == explicit
    assert 'produces = frozenset({"text", "image", "speech"})' in plain


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "tts", "--produces", "text,image"], "--produces is for --kind backbone only"),
        (["--kind", "metric", "--produces", "text"], "--produces is for --kind backbone only"),
        (["--kind", "backbone", "--produces", "image,speech"], "'image,speech' lacks text"),
        (["--kind", "backbone", "--produces", "image"], "'image' lacks text"),
        (["--kind", "backbone", "--produces", ""], "'' lacks text"),
        (["--kind", "backbone", "--produces", "text"], "text alone is a planner"),
        (["--kind", "backbone", "--produces", "text,video"], "unknown modality video"),
    ],
)
def test_produces_is_refused_in_one_line_where_it_cannot_apply(
    args: list[str], message: str, tmp_path: Path
) -> None:
    proc = run_cli("plugin", "new", "mine", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("omnistory: error: "), proc.stderr
    assert message in lines[0], lines[0]
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("kind", ["planner", "backbone", "judge"])
def test_every_plugin_ignores_its_build_and_run_leftovers(kind: str, tmp_path: Path) -> None:
    assert run_cli("plugin", "new", "mine", "--kind", kind, cwd=tmp_path).returncode == 0
    ignored = (tmp_path / "omnistory-mine" / ".gitignore").read_text().splitlines()
    patterns = {"build/", "dist/", "*.egg-info/", "__pycache__/", "outputs/", ".pytest_cache/"}
    assert patterns <= set(ignored), ignored


def test_the_test_extra_brings_pytest_and_the_test_kit(tmp_path: Path) -> None:
    proc = run_cli("plugin", "new", "my_model", "--kind", "planner", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    pyproject = (tmp_path / "omnistory-my-model/pyproject.toml").read_text()
    # read as text: tomllib is Python 3.11+, the project supports 3.10
    extras = pyproject.split("[project.optional-dependencies]\n", 1)[1].split("\n[", 1)[0]
    (test,) = re.findall(r"^test = \[(.*)\]$", extras, re.M)
    names = {re.split(r"[<>=]", req.strip().strip('"'))[0] for req in test.split(",")}
    assert names == {"pytest", "omnistory-testkit"}, test
    assert "pip install -e 'omnistory-my-model[test]'" in proc.stdout
    # CONTRIBUTING's first commands are the same ones
    start = (ROOT / "CONTRIBUTING.md").read_text().split("**Start here:**", 1)[1][:600]
    assert "pip install -e './omnistory-my-model[test]' && pytest omnistory-my-model/tests" in start
