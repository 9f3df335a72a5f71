"""A store made before the package split is fully reused: the current code computes the same call
keys and writes the same output bytes as commit 07ff5fc did, and a rerun makes no call.

``tests/data/store_reuse_07ff5fc.json`` was written by ``tools/make_store_reuse_golden.py`` with
the code of 07ff5fc (see its docstring).  Two sweeps are held to it: the demo grid of built-in
components, and ``suite=paper32`` on 2 examples with every model replaced by its stand-in.  A key
that differs means a user's existing store is silently recomputed (a module path or version that
leaks into a key); never regenerate the golden file from the current code to make this pass.

The stand-ins here copy their real component's name, version, ``reads`` and ``runtime_params``
but neither its ``output_params`` nor its declared parameters (``declarations=False``, as those of
07ff5fc: every given parameter enters the key), so the paper32 half pins presets, the engine's
inputs and the stand-ins' keys, not what a real plugin adds to its keys (library versions, code
digests): those change by design with the installed packages, which a golden file in CI cannot
follow.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from omnistory_testkit import run_cli
from omnistory_testkit.standins import make_standin_site

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_PATH = ROOT / "tests" / "data" / "store_reuse_07ff5fc.json"


def _tool():
    # the golden file's generator defines what is compared: one definition for both sides
    spec = importlib.util.spec_from_file_location(
        "make_store_reuse_golden", ROOT / "tools" / "make_store_reuse_golden.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _tool()
GOLDEN: dict[str, Any] = json.loads(GOLDEN_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def standins(tmp_path_factory) -> dict[str, str]:
    # as 07ff5fc's stand-ins: no declared parameters (see make_standin_site's declarations)
    site = make_standin_site(tmp_path_factory.mktemp("standins"), declarations=False)
    return {"PYTHONPATH": str(site)}


def _sweep(name: str, cwd: Path, env: dict[str, str] | None) -> None:
    args, _ = tool.RUNS[name]
    proc = run_cli(*args, *tool.COMMON, cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _differences(got: dict[str, Any], want: dict[str, Any], cwd: Path) -> list[str]:
    """What a reader needs to find the cause: which components' keys and which files moved."""
    out = []
    if got["components"] != want["components"]:
        out.append(f"records per component: {got['components']} != golden {want['components']}")
    new = sorted(set(got["calls"]) - set(want["calls"]))
    gone = set(want["calls"]) - set(got["calls"])
    if new or gone:
        calls = cwd / "out" / "store" / "calls"
        owners = Counter(
            json.loads((calls / k[:2] / f"{k}.json").read_text())["component"] for k in new
        )
        out.append(
            f"{len(new)} keys not in the golden store, made by {dict(sorted(owners.items()))}"
            f" (e.g. {new[:2]}); {len(gone)} golden keys not made"
        )
    for job in sorted(set(got["outputs"]) | set(want["outputs"])):
        mine, theirs = got["outputs"].get(job, {}), want["outputs"].get(job, {})
        changed = sorted(p for p in set(mine) | set(theirs) if mine.get(p) != theirs.get(p))
        if changed:
            out.append(f"{job}: {len(changed)} output files differ, e.g. {changed[:3]}")
    return out


def _rerun_calls_nothing(name: str, cwd: Path, env: dict[str, str] | None) -> None:
    before = tool.collect(cwd)["calls"]
    _sweep(name, cwd, env)
    sweep = cwd / tool.SWEEP
    stats = {"sweep": json.loads((sweep / "sweep_stats.json").read_text())["components"]}
    for path in sorted(sweep.glob("*/stats.json")):
        stats[path.parent.name] = json.loads(path.read_text())["components"]
    busy = {
        (where, component): (c["calls"], c["loads"])
        for where, counts in stats.items()
        for component, c in counts.items()
        if c["calls"] or c["loads"]
    }
    assert not busy, f"the rerun called or loaded (calls, loads): {busy}"
    assert len(stats) == len(GOLDEN["runs"][name]["outputs"]) + 1
    assert tool.collect(cwd)["calls"] == before


def _check(name: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    assert tool.environment() == GOLDEN["environment"], (
        "these library versions change keys or output bytes by design, not because of the code:"
        " regenerate the golden file with the code of 07ff5fc in this environment"
        " (tools/make_store_reuse_golden.py)"
    )
    want = GOLDEN["runs"][name]
    assert list(tool.RUNS[name][0]) == want["args"]
    _sweep(name, cwd, env)
    got = tool.collect(cwd)
    problems = _differences(got, want, cwd)
    assert not problems, "\n".join(problems)
    assert got == {k: want[k] for k in ("calls", "components", "outputs")}
    _rerun_calls_nothing(name, cwd, env)


def test_the_golden_file_comes_from_the_code_before_the_split() -> None:
    assert GOLDEN["revision"].startswith("07ff5fc"), (
        "regenerate it with the code of 07ff5fc (tools/make_store_reuse_golden.py), never with the"
        " current code"
    )
    assert set(GOLDEN["runs"]) == set(tool.RUNS)


def test_demo_grid_keys_and_outputs_are_those_of_07ff5fc(tmp_path: Path) -> None:
    _check("demo_grid", tmp_path)


def test_paper32_keys_and_outputs_are_those_of_07ff5fc(
    tmp_path: Path, standins: dict[str, str]
) -> None:
    _check("paper32", tmp_path, standins)
