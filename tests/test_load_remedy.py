"""A ``load()`` that cannot import a module suggests only what would install it, through the real
CLI: the requirement the component declares (and ``env create``, whose environment installs the
declared requirements), else the extra of the plugin's distribution that provides it, else the
distribution that provides the module by its usual name -- never ``env create`` for a module the
environment it makes would lack just the same."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from omnistory_testkit import run_cli
from test_output_checks import line_of, write_plugin

from omnistory_core.components import Planner
from omnistory_core.engine.failures import import_remedy

QUIET = "engine.progress=false"
PACKAGE = "omnistory_needy"

HOOKS = """
from omnistory_core.api import hookimpl


@hookimpl
def register_planners(register):
    from omnistory_needy import planners

    for cls in (planners.Declared, planners.Extra, planners.Unknown):
        register(cls)
"""

PLANNERS = """
from omnistory_core.api import Planner


class Declared(Planner):
    name = "needy_declared"
    version = "1"
    reads = ("current_text",)
    parameters = ()
    requirements = ("omnistory-absent-alpha>=1.2",)

    def load(self):
        import omnistory_absent_alpha  # ALPHA


class Extra(Planner):
    name = "needy_extra"
    version = "1"
    reads = ("current_text",)
    parameters = ()

    def load(self):
        import omnistory_absent_beta  # BETA


class Unknown(Planner):
    name = "needy_unknown"
    version = "1"
    reads = ("current_text",)
    parameters = ()
    # an environment of its own would hold numpy, not the module load() wants
    requirements = ("numpy",)

    def load(self):
        from omnistory_absent_gamma.models import Net  # GAMMA
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    write_plugin(
        site,
        {f"{PACKAGE}/__init__.py": HOOKS, f"{PACKAGE}/planners.py": PLANNERS},
        dist="omnistory-needy",
        package=PACKAGE,
        requires=("numpy", 'omnistory-absent-beta>=2; extra == "fast"'),
    )
    return site


def cannot_run(site: Path, cwd: Path, planner: str, *args: str) -> str:
    """The one line the job stops with."""
    env = {"PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = run_cli(
        f"planner={planner}", "dataset.limit=1", "output_root=out", QUIET, *args, cwd=cwd, env=env
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if f"planner={planner} cannot run" in line]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_a_declared_requirement_is_installed_here_or_in_its_own_environment(
    site: Path, tmp_path: Path
) -> None:
    line = cannot_run(site, tmp_path, "needy_declared")
    where = f"{PACKAGE}/planners.py:{line_of(PLANNERS, '# ALPHA')}"
    assert f"ModuleNotFoundError: No module named 'omnistory_absent_alpha' (at {where})" in line
    assert line.endswith(
        'install it into this environment: pip install "omnistory-absent-alpha>=1.2" (a'
        " requirement planner=needy_declared declares), or run planner=needy_declared in its"
        " own: `python -m omnistory_core env create planner=needy_declared`"
    ), line


def test_an_isolated_component_is_told_to_install_into_its_own_environment(
    site: Path, tmp_path: Path
) -> None:
    # the worker's load() fails in the other interpreter (here: this one, as a worker process)
    line = cannot_run(site, tmp_path, "needy_declared", f"++planner.runner.python={sys.executable}")
    assert "No module named 'omnistory_absent_alpha'" in line
    assert line.endswith(
        f"install it into planner=needy_declared's environment: {sys.executable} -m pip install"
        ' "omnistory-absent-alpha>=1.2" (a requirement planner=needy_declared declares)'
    ), line
    assert "env create" not in line  # it has its own environment already


def test_an_extra_of_the_plugin_is_named_and_env_create_is_not(site: Path, tmp_path: Path) -> None:
    line = cannot_run(site, tmp_path, "needy_extra")
    assert line.endswith(
        'install the extra of omnistory-needy that provides it: pip install "omnistory-needy[fast]"'
    ), line
    assert "env create" not in line


def test_a_module_nothing_declares_names_its_distribution_only(site: Path, tmp_path: Path) -> None:
    line = cannot_run(site, tmp_path, "needy_unknown")
    assert "No module named 'omnistory_absent_gamma'" in line
    assert line.endswith(
        "install the distribution that provides the module 'omnistory_absent_gamma' into this"
        " environment (e.g. pip install omnistory-absent-gamma), then re-run"
    ), line
    assert "env create" not in line


class Plain(Planner):
    name = "plain-test"
    reads = ("current_text",)


@pytest.mark.parametrize(
    ("module", "distribution"),
    [("cv2", "opencv-python"), ("sklearn", "scikit-learn"), ("PIL", "pillow"), ("yaml", "pyyaml")],
)
def test_an_import_name_is_mapped_to_its_distribution(module: str, distribution: str) -> None:
    remedy = import_remedy(Plain(), ModuleNotFoundError(f"No module named {module!r}", name=module))
    assert f"(e.g. pip install {distribution})" in remedy and "env create" not in remedy
