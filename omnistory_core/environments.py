"""``python -m omnistory_core env create <group>=<name>``: a virtual environment for one component.

The environment gets omnistory-core and the plugin's distribution (from the same local source tree
when they were installed from one, else the same version from the package index) plus the
component's declared ``requirements``.  Run the component there with
``<group>.runner.python=<venv>/bin/python``.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

GROUP_KIND = {
    "planner": "planner",
    "image": "image",
    "tts": "tts",
    "backbone": "backbone",
    "metric": "metric",
    "judge": "judge",
}


def install_spec(distribution: str) -> list[str]:
    """pip arguments that reinstall ``distribution`` the way it is installed here."""
    # A stray *.egg-info in the working directory can shadow the installed metadata: prefer the
    # installed distribution that records where it came from.
    candidates = [
        d
        for d in md.distributions()
        if (d.metadata["Name"] or "").lower().replace("_", "-")
        == distribution.lower().replace("_", "-")
    ]
    if not candidates:
        raise SystemExit(f"distribution {distribution!r} is not installed")
    dist = next((d for d in candidates if d.read_text("direct_url.json")), candidates[0])
    direct = dist.read_text("direct_url.json")
    if direct:
        info = json.loads(direct)
        url = info.get("url", "")
        if url.startswith("file://"):
            path = unquote(urlparse(url).path)
            if info.get("dir_info", {}).get("editable"):
                return ["-e", path]
            return [path]
    return [f"{dist.metadata['Name']}=={dist.version}"]


def plan_env(selections: list[str]) -> tuple[list[tuple[str, str]], list[list[str]]]:
    """The (kind, name) of each selected component and the pip argument lists for their shared
    environment: all declared requirements in one resolver call (so pins such as torch and
    torchaudio are solved together), then omnistory-core, then the plugins' distributions."""
    from omnistory_core.plugins import load_plugins

    registry = load_plugins()
    components: list[tuple[str, str]] = []
    requirements: list[str] = []
    distributions: list[str] = []
    for selection in selections:
        group, _, name = selection.partition("=")
        if group not in GROUP_KIND or not name:
            raise SystemExit(
                f"expected <group>=<name> with group in {sorted(GROUP_KIND)}, got {selection!r}"
            )
        cls = registry.component(GROUP_KIND[group], name)
        components.append((cls.kind, cls.name))
        for requirement in getattr(cls, "requirements", ()) or ():
            if requirement not in requirements:
                requirements.append(requirement)
        dist = registry.plugins[registry.origins[(cls.kind, cls.name)]].distribution
        if dist not in ("omnistory-core", "unknown") and dist not in distributions:
            distributions.append(dist)
    steps: list[list[str]] = []
    if requirements:
        steps.append(requirements)
    steps.append(install_spec("omnistory-core"))
    steps.extend(install_spec(d) for d in distributions)
    return components, steps


def create(
    selections: list[str],
    directory: Path | None,
    python: str,
    dry_run: bool,
    system_site_packages: bool = False,
    compile_bytecode: bool = True,
) -> int:
    from omnistory_core.engine.isolation import runner_env_var

    components, steps = plan_env(selections)
    default = "-".join(f"{k}-{n}" for k, n in components)
    directory = directory or Path(".venvs") / default
    venv_python = directory / "bin" / "python"
    flags = ["--system-site-packages"] if system_site_packages else []
    commands = [[python, "-m", "venv", *flags, str(directory)]]
    pip = [str(venv_python), "-m", "pip", "install", "-q"]
    if not compile_bytecode:
        pip.append("--no-compile")
    commands += [[*pip, *step] for step in steps]
    for command in commands:
        print("$ " + " ".join(command), flush=True)
    if dry_run:
        return 0
    t0 = time.perf_counter()
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for command in commands:
        subprocess.run(command, check=True, env=env)
    print(f"created {directory} in {time.perf_counter() - t0:.0f} s")
    resolved = venv_python.absolute()
    for kind, name in components:
        group = next(g for g, k in GROUP_KIND.items() if k == kind)
        print(f"use it with: {group}.runner.python={resolved}")
        print(f"         or: export {runner_env_var(kind, name)}={resolved}")
    return 0


def main(argv: list[str]) -> int:
    summary = (__doc__ or "").partition("\n")[0]  # no docstring under python -OO
    parser = argparse.ArgumentParser(prog="omnistory env", description=summary)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("create", help="create a component's virtual environment")
    c.add_argument(
        "selection",
        nargs="+",
        help="<group>=<name>, e.g. tts=parler (several share one environment)",
    )
    c.add_argument("--dir", type=Path, default=None, help="default: .venvs/<kind>-<name>")
    c.add_argument("--python", default=sys.executable, help="interpreter that creates the venv")
    c.add_argument("--dry-run", action="store_true", help="print the commands only")
    c.add_argument("--system-site-packages", action="store_true")
    c.add_argument(
        "--no-compile",
        action="store_true",
        help="pip writes no bytecode at install: Python writes it for the modules a run imports"
        " (a faster create for an environment that runs little)",
    )
    args = parser.parse_args(argv)
    return create(
        args.selection,
        args.dir,
        args.python,
        args.dry_run,
        args.system_site_packages,
        compile_bytecode=not args.no_compile,
    )
