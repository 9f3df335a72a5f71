"""Importing the core and discovering plugins must not import torch or other heavy stacks."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "diffusers", "vllm", "matplotlib", "scipy", "openai", "anthropic")
#: not heavy stacks, but a tenth of a second each in every process that discovers the plugins
#: (a sweep's jobs, every CLI command): registering a component must not import them
DISCOVERY = ("numpy", "pyarrow")


def test_import_and_plugin_discovery_stay_light() -> None:
    code = (
        "import sys, omnistory_core, omnistory_core.contract, omnistory_core.plan_schema,"
        " omnistory_core.components, omnistory_core.engine.job, omnistory_core.app\n"
        "from omnistory_core.plugins import load_plugins\n"
        "registry = load_plugins()\n"
        "assert registry.names('planner'), 'no planners registered'\n"
        f"print(','.join(m for m in {HEAVY + DISCOVERY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"heavy modules imported: {out.stdout.strip()}"


def test_public_api_stays_light() -> None:
    """``omnistory_core.api`` (what plugins import) pulls in no model stack and no SDK."""
    code = (
        "import sys, omnistory_core.api\n"
        f"print(','.join(m for m in {HEAVY!r} + ('numpy', 'PIL') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"heavy modules imported: {out.stdout.strip()}"
