"""``python -m omnistory_core plugin new``: each kind's distribution installs into a fresh virtual
environment, passes its own tests unchanged, and runs through the CLI from that environment."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
from omnistory_testkit import run_cli

from omnistory_core.scaffold import KINDS, class_name

NAMES = {kind: f"tiny_{kind}" for kind in KINDS}


def _run(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PYTHONPATH", None)  # the plugins must come from the venv, not from this checkout
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A fresh venv holding the six generated plugins (one install for all kinds, to keep the
    module's runtime down); returns (its python, the folder holding the distributions)."""
    root = tmp_path_factory.mktemp("scaffold")
    made = root / "made"
    made.mkdir()
    for kind, name in NAMES.items():
        proc = run_cli("plugin", "new", name, "--kind", kind, "--dir", str(made), cwd=root)
        assert proc.returncode == 0, proc.stderr
    env_dir = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env_dir)],
        check=True,
    )
    python = env_dir / "bin" / "python"
    if sys.prefix != sys.base_prefix:
        # created from inside a venv, the new one sees the base interpreter's packages, not this
        # venv's: layer it on top of this one (omnistory_core, pytest, pip and setuptools), with
        # the new plugins in its own site-packages, first on sys.path
        purelib = _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], root
        ).stdout.strip()
        lines = [f"import site; site.addsitedir({p!r})" for p in site.getsitepackages()]
        Path(purelib, "_omnistory_parent_env.pth").write_text("\n".join(lines) + "\n")
    dists = sorted(str(p) for p in made.iterdir())
    proc = _run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", *dists],
        root,
    )
    assert proc.returncode == 0, proc.stderr
    return python, made


def _dist(made: Path, kind: str) -> Path:
    return made / ("omnistory-" + NAMES[kind].replace("_", "-"))


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_generated_plugin_installs_passes_its_tests_and_runs(
    kind: str, venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, made = venv
    name, dist = NAMES[kind], _dist(made, kind)
    package = f"omnistory_{name}"
    where = _run([str(python), "-c", f"import {package}; print({package}.__file__)"], tmp_path)
    assert where.returncode == 0 and str(made) not in where.stdout, where  # the installed copy

    # its own tests, unchanged, from its own folder, as its author runs them
    tests = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"], dist)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert " passed" in tests.stdout and "skipped" not in tests.stdout, tests.stdout

    # the CLI of the venv knows it, with its declared parameters
    params = _run(
        [str(python), "-m", "omnistory_core", "plugins", "--params", f"{kind}={name}"], tmp_path
    )
    assert params.returncode == 0 and "device" in params.stdout, params.stdout + params.stderr

    out = tmp_path / "out"
    if kind in ("metric", "judge"):
        run = _run(
            [
                str(python),
                "-m",
                "omnistory_core",
                "dataset.limit=2",
                f"output_root={out}",
                "engine.progress=false",
            ],
            tmp_path,
        )
        assert run.returncode == 0, run.stderr
        job = out / "runs" / "demo" / "template-copy-espeak"
        flags = ["--metrics", name] if kind == "metric" else ["--metrics", "", "--judges", name]
        run = _run(
            [
                str(python),
                "-m",
                "omnistory_core",
                "evaluate",
                str(job),
                *flags,
                "--no-report",
                "--no-progress",
            ],
            tmp_path,
        )
        assert run.returncode == 0, run.stderr
        rows = [json.loads(line) for line in (job / "scores.jsonl").read_text().splitlines()]
        mine = [r for r in rows if r["evaluator"] == name]
        assert len(mine) == 2 and all(r["status"] == "ok" and r["kind"] == kind for r in mine), rows
    else:
        run = _run(
            [
                str(python),
                "-m",
                "omnistory_core",
                f"{kind}={name}",
                "dataset.limit=2",
                f"output_root={out}",
                "engine.progress=false",
                "engine.fail_on_missing=true",
            ],
            tmp_path,
        )
        assert run.returncode == 0, run.stderr
        (job,) = (out / "runs" / "demo").iterdir()
        manifest = json.loads((job / "manifest.json").read_text())
        assert manifest["components"][kind]["name"] == name, manifest["components"]
        for index in (0, 1):
            assert (job / "text" / str(index) / "generated.txt").read_text().strip()
            assert (job / "image" / str(index) / "generated.png").stat().st_size > 0
            assert (job / "speech" / str(index) / "generated.wav").stat().st_size > 0


@pytest.mark.parametrize("kind", list(KINDS))
def test_generated_code_is_lint_clean(kind: str, tmp_path: Path) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    longest = "a" * 10 + "_" + "b" * 13  # the longest name accepted: no line grows past 100
    for name in ("m", longest):
        proc = run_cli("plugin", "new", name, "--kind", kind, "--dir", str(tmp_path), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        dist = tmp_path / ("omnistory-" + name.replace("_", "-"))
        check = _run(
            [ruff, "check", "--select", "E,F,I,B,UP", "--output-format", "concise", "."], dist
        )
        assert check.returncode == 0, check.stdout + check.stderr
        form = _run([ruff, "format", "--check", "."], dist)
        assert form.returncode == 0, form.stdout + form.stderr


def test_files_and_names(tmp_path: Path) -> None:
    proc = run_cli("plugin", "new", "my_model", "--kind", "tts", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    root = tmp_path / "omnistory-my-model"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [
        ".gitignore",
        "README.md",
        "pyproject.toml",
        "src/omnistory_my_model/__init__.py",
        "src/omnistory_my_model/conf/__init__.py",
        "src/omnistory_my_model/conf/system/template_copy_my_model.yaml",
        "src/omnistory_my_model/plugin.py",
        "src/omnistory_my_model/tts.py",
        "tests/test_my_model.py",
    ]
    pyproject = (root / "pyproject.toml").read_text()
    assert 'name = "omnistory-my-model"' in pyproject
    assert 'my_model = "omnistory_my_model.plugin"' in pyproject
    assert "register_tts_experts" in (root / "src/omnistory_my_model/plugin.py").read_text()
    assert (
        f"class {class_name('my_model', 'tts')}(TTSExpert)"
        in (root / "src/omnistory_my_model/tts.py").read_text()
    )
    assert "${" not in "".join(p.read_text() for p in root.rglob("*") if p.is_file())
    assert "tts=my_model" in proc.stdout and "pip install -e" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["My-Model", "--kind", "planner"], "plugin name 'My-Model': use lowercase letters"),
        (["2fast", "--kind", "planner"], "plugin name '2fast': use lowercase letters"),
        (["a" * 25, "--kind", "planner"], "at most 24 characters"),
        (["class", "--kind", "planner"], "plugin name 'class' is a Python keyword"),
        (["template", "--kind", "planner"], "planner=template is already registered"),
        (["espeak", "--kind", "tts"], "tts=espeak is already registered"),
    ],
)
def test_refuses_bad_names(args: list[str], message: str, tmp_path: Path) -> None:
    proc = run_cli("plugin", "new", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("omnistory: error: "), proc.stderr
    assert message in lines[0], lines[0]
    assert not any(tmp_path.iterdir())


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    existing = tmp_path / "omnistory-mine"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine")
    proc = run_cli("plugin", "new", "mine", "--kind", "metric", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "already exists; not overwriting" in lines[0], proc.stderr
    assert [p.name for p in existing.iterdir()] == ["keep.txt"]


def test_unknown_kind_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("plugin", "new", "mine", "--kind", "vocoder", cwd=tmp_path)
    assert proc.returncode == 2
    assert "invalid choice: 'vocoder'" in proc.stderr
    assert not any(tmp_path.iterdir())
