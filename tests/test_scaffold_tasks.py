"""``plugin new NAME --kind KIND --task TASK [--unit item|group]``: a plugin of every kind each
task offers, for each task.

Every template of every task is scaffolded, linted, and its component passes
``check_component`` on its task (in this process, from the generated source: the first test
each generated plugin ships).  Installing a distribution and running its whole generated test
file (the CLI run included) costs ~5-10 s each, so that is done for a representative subset
in one fresh environment and one pytest process: the story-level ViStoryBench image expert (one
call per story, the issue's case), a ViStoryBench metric (the evaluation path on the task) and
Omni-StoryBench's new book-level expert; the other Omni-StoryBench kinds are installed and run
by tests/test_scaffold.py and tests/test_scaffold_backbones.py."""

from __future__ import annotations

import importlib
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
from omnistory_testkit import check_component, run_cli

from omnistory_core.plugins import load_plugins
from omnistory_core.scaffold import choose, new_plugin
from omnistory_core.scaffold_install import install_lines, needed
from omnistory_core.scaffold_kinds import KINDS, SHAPES

VISTORY = importlib.import_module("omnistory_vistorybench.scaffold").TEMPLATES


def _offers() -> list[tuple[str, str, str, str | None]]:
    """(task, kind, unit, produces) of every template each first-party task offers."""
    out = [("omnistorybench", k, "item", None) for k in KINDS if k != "backbone"]
    out += [("omnistorybench", "backbone", "item", p) for p in SHAPES]
    out.append(("omnistorybench", "image", "group", None))
    out += [("vistorybench", t.kind, t.unit, t.produces or None) for t in VISTORY.values()]
    return out


OFFERS = _offers()


def _name(task: str, kind: str, unit: str, produces: str | None) -> str:
    shape = "".join(m[0] for m in (produces or "").split(",") if m)
    return f"{task[0]}_{kind}_{unit[0]}{shape}"


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PYTHONPATH", None)
    return env


def test_each_task_offers_every_kind_it_can_run() -> None:
    """ViStoryBench makes images only: every kind but a TTS expert, a story-level image expert,
    and the refusal for what it lacks names what it offers."""
    kinds = {t.kind for t in VISTORY.values()}
    assert kinds == set(KINDS) - {"tts"}
    assert any(t.unit == "group" for t in VISTORY.values())
    from omnistory_core.scaffold_kinds import ScaffoldError

    with pytest.raises(ScaffoldError, match=r"no template for --kind tts; it offers: --kind image"):
        choose("tts", "vistorybench", None, None)
    with pytest.raises(ScaffoldError, match=r"--unit 'sometimes': one of item, group"):
        choose("image", "vistorybench", "sometimes", None)
    with pytest.raises(ScaffoldError, match=r"vistroybench"):
        choose("image", "vistroybench", None, None)


@pytest.mark.parametrize(("task", "kind", "unit", "produces"), OFFERS)
def test_every_template_is_lint_clean_and_reads_its_tasks_inputs(
    task: str, kind: str, unit: str, produces: str | None, tmp_path: Path
) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff is not None, "ruff is part of the test environment"
    name = _name(task, kind, unit, produces)
    root = new_plugin(name, kind, tmp_path, produces, task=task, unit=unit)
    text = "".join(p.read_text() for p in root.rglob("*") if p.is_file())
    assert "${" not in text
    check = subprocess.run(
        [ruff, "check", "--select", "E,F,I,B,UP", "--output-format", "concise", "."],
        cwd=root,
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert check.returncode == 0, check.stdout + check.stderr
    form = subprocess.run([ruff, "format", "--check", "."], cwd=root, capture_output=True)
    assert form.returncode == 0, form.stdout
    tests = (root / "tests" / f"test_{name}.py").read_text()
    assert "check_component(" in tests
    if task != "omnistorybench":
        assert f'task="{task}"' in tests and "dataset=vistory_fixture" in tests, tests
        preset = next((root / "src").rglob("conf/*/*.yaml")).read_text()
        assert "vistorybench" in preset, preset


@pytest.mark.parametrize(
    ("task", "kind", "unit", "produces"), [o for o in OFFERS if o[0] == "vistorybench"]
)
def test_every_vistorybench_template_passes_check_component(
    task: str, kind: str, unit: str, produces: str | None, tmp_path: Path
) -> None:
    """The generated component, imported from its generated source, on its task's fixture."""
    name = _name(task, kind, unit, produces)
    root = new_plugin(name, kind, tmp_path, produces, task=task, unit=unit)
    sys.path.insert(0, str(root / "src"))
    try:
        module = importlib.import_module(f"omnistory_{name}.{KINDS[kind].module}")
        (cls,) = [
            v
            for v in vars(module).values()
            if isinstance(v, type) and v.__module__ == module.__name__
        ]
        report = check_component(cls, task=task)  # as its generated test calls it
    finally:
        sys.path.remove(str(root / "src"))
        for mod in [m for m in sys.modules if m.startswith(f"omnistory_{name}")]:
            del sys.modules[mod]
    assert report.task == task
    checks = {"identity", "reads", "outputs", "cache", "deterministic", "failures"}
    assert checks <= {p.split()[0] for p in report.passed}, str(report)
    assert not report.skipped, str(report)
    assert getattr(cls, "unit", "item") == unit


def test_printed_install_lines_bring_what_a_clean_environment_lacks(tmp_path: Path) -> None:
    """In an environment without the test kit (a clean clone's fresh venv), the next steps
    start with the one command installing it (and the task's distribution) from the checkout
    omnistory_core runs from; with everything installed, only the plugin's own install."""
    task = load_plugins().task("vistorybench")
    assert needed(task) == ["omnistory-eval", "omnistory-testkit", "omnistory-vistorybench"]
    root = tmp_path / "omnistory-mine"
    first, own = install_lines(root, task, installed=lambda dist: False)
    checkout = Path(__file__).resolve().parents[1]
    for dist in needed(task):
        assert f"-e '{checkout / 'plugins' / dist}'" in first, first
        assert (checkout / "plugins" / dist / "pyproject.toml").is_file()
    assert own == f"pip install -e '{root}[test]'"
    assert install_lines(root, task, installed=lambda dist: True) == [own]
    default = load_plugins().task("omnistorybench")
    assert "omnistory-vistorybench" not in install_lines(root, default, lambda d: False)[0]


SUBSET = [
    ("vistorybench", "image", "group", None),
    ("vistorybench", "metric", "item", None),
    ("omnistorybench", "image", "group", None),
]


@pytest.mark.slow(seconds=25)
def test_a_representative_subset_installs_and_passes_its_generated_tests(
    tmp_path: Path,
) -> None:
    made = tmp_path / "made"
    for task, kind, unit, produces in SUBSET:
        args = ["plugin", "new", _name(task, kind, unit, produces), "--kind", kind]
        args += ["--task", task, "--unit", unit, "--dir", str(made)]
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        printed = proc.stdout.splitlines()
        assert any(line.strip().startswith("pytest ") for line in printed), proc.stdout
        small = "dataset=vistory_fixture" if task != "omnistorybench" else "dataset.limit=2"
        assert any(small in line for line in printed), proc.stdout
    _bare_distribution(made / "omnistory-bare")
    env_dir = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env_dir)],
        check=True,
    )
    python = env_dir / "bin" / "python"
    if sys.prefix != sys.base_prefix:
        # layered on this venv (omnistory_core, the test kit, the task plugins, pytest, pip),
        # the generated plugins in its own site-packages
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        lines = [f"import site; site.addsitedir({p!r})" for p in site.getsitepackages()]
        Path(purelib, "_omnistory_parent_env.pth").write_text("\n".join(lines) + "\n")
    dists = sorted(str(p) for p in made.iterdir())
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    proc = subprocess.run([*pip, *dists], capture_output=True, text=True, env=_env())
    assert proc.returncode == 0, proc.stderr
    # their tests, unchanged, in one pytest process (each distribution's tests/ as printed)
    tests = [str(Path(d) / "tests") for d in dists if (Path(d) / "tests").is_dir()]
    proc = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *tests],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]
    for dist in dists:
        assert str(made) not in _installed_at(python, Path(dist).name, tmp_path)

    # a component without parameters and without a yaml runs on both tasks, as CONTRIBUTING says
    for task_args in (
        ["dataset.limit=1"],
        ["task=vistorybench", "dataset=vistory_fixture", "dataset.stories=[02]"],
    ):
        out = tmp_path / "bare-out" / task_args[0].split("=")[0]
        args = ["image=bare", *task_args, f"output_root={out}", "engine.progress=false"]
        run = subprocess.run(
            [str(python), "-m", "omnistory_core", *args, "engine.fail_on_missing=true"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=_env(),
        )
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        (manifest,) = out.rglob("manifest.json")
        assert '"bare"' in manifest.read_text(), manifest.read_text()[:2000]


def _bare_distribution(root: Path) -> None:
    """A plugin as small as CONTRIBUTING allows: an image expert declaring no parameters, no
    yaml, one hook."""
    package = root / "src" / "omnistory_bare"
    package.mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        "[build-system]\n"
        'requires = ["setuptools>=69"]\n'
        'build-backend = "setuptools.build_meta"\n'
        "[project]\n"
        'name = "omnistory-bare"\n'
        'version = "0.1.0"\n'
        "[project.entry-points.omnistory]\n"
        'bare = "omnistory_bare"\n'
        "[tool.setuptools.packages.find]\n"
        'where = ["src"]\n'
    )
    (package / "__init__.py").write_text(
        "from omnistory_core.api import ImageExpert, hookimpl\n"
        "\n"
        "\n"
        "class Bare(ImageExpert):\n"
        '    name = "bare"\n'
        '    version = "1"\n'
        '    reads = ("image_prompt",)\n'
        "\n"
        "    def run_one(self, item):\n"
        "        from PIL import Image\n"
        "\n"
        '        return Image.new("RGB", (8, 8), (len(item["image_prompt"]) % 256, 0, 0))\n'
        "\n"
        "\n"
        "@hookimpl\n"
        "def register_image_experts(register):\n"
        "    register(Bare)\n"
    )


def _installed_at(python: Path, dist: str, cwd: Path) -> str:
    package = "omnistory_" + dist.removeprefix("omnistory-").replace("-", "_")
    proc = subprocess.run(
        [str(python), "-c", f"import {package}; print({package}.__file__)"],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
