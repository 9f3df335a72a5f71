"""What a scaffolded plugin depends on, and the commands that install it as printed by ``plugin
new``.

The plugin's ``test`` extra needs the test kit (``omnistory-testkit``, which needs the evaluation
distribution, ``omnistory-eval``), and a plugin of a task other than Omni-StoryBench needs that
task's distribution (``omnistory-vistorybench``).  They ship with omnistory_core's source, not on
PyPI: where one of them is not installed yet, ``pip install -e './omnistory-NAME[test]'`` would
look for it on the index and fail, so the next steps start with the one command that installs
them from the checkout omnistory_core runs from (``<checkout>/plugins/<distribution>``).
"""

from __future__ import annotations

import importlib.metadata as md
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: what the ``test`` extra needs from omnistory_core's source, in install order
TEST_DISTRIBUTIONS: tuple[str, ...] = ("omnistory-eval", "omnistory-testkit")
CORE = "omnistory-core"


def _installed(dist: str) -> bool:
    try:
        md.version(dist)
    except md.PackageNotFoundError:
        return False
    return True


def task_distribution(task: Any) -> str | None:
    """The distribution that registers ``task`` (None: the core's own task)."""
    top = str(task.scaffold or task.record or "").split(".")[0]
    if not top or top == "omnistory_core":
        return None
    found = md.packages_distributions().get(top) or [top.replace("_", "-")]
    return found[0]


def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "0.1.0"


def dependencies(task_dist: str | None) -> list[str]:
    """The plugin's runtime requirements: the core, and the task's distribution."""
    out = [f"{CORE}>={_version(CORE)}"]
    if task_dist:
        out.append(f"{task_dist}>={_version(task_dist)}")
    return out


def checkout_root() -> Path | None:
    """The source checkout omnistory_core runs from (a clone: it has ``plugins/``), or None (an
    installed wheel)."""
    import omnistory_core

    root = Path(omnistory_core.__file__).resolve().parents[1]
    return root if (root / "plugins").is_dir() and (root / "pyproject.toml").is_file() else None


def needed(task: Any) -> list[str]:
    """The distributions from omnistory_core's source the plugin's ``[test]`` install needs."""
    task_dist = task_distribution(task)
    return [*TEST_DISTRIBUTIONS, *([task_dist] if task_dist else [])]


def install_lines(
    root: Path, task: Any, installed: Callable[[str], bool] = _installed
) -> list[str]:
    """The install commands of the next steps: the one that brings what is missing from the
    checkout (only when something is), then the plugin's own."""
    absent = [d for d in needed(task) if not installed(d)]
    lines = []
    if absent:
        checkout = checkout_root()
        folders = [checkout / "plugins" / d for d in absent] if checkout else []
        if folders and all((f / "pyproject.toml").is_file() for f in folders):
            editable = " ".join(f"-e '{f}'" for f in folders)
            lines.append(f"pip install {editable}   # not on PyPI: from omnistory_core's checkout")
        else:
            lines.append(
                f"pip install {' '.join(absent)}   # from omnistory_core's source"
                " (plugins/<name> of its repository): not on PyPI"
            )
    lines.append(f"pip install -e '{root}[test]'")
    return lines


__all__ = [
    "TEST_DISTRIBUTIONS",
    "checkout_root",
    "dependencies",
    "install_lines",
    "needed",
    "task_distribution",
]
