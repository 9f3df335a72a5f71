"""What an evaluation records beside ``scores.jsonl`` so that the report never has to guess.

* ``systems.json``: the task the runs belong to and, for a task with its own evaluation (one
  system per run: ViStoryBench), what each scored system is (``EvaluatedSystem.to_dict()``: its
  official levels, split and stories).  An outputs tree has no manifest, so without this the
  report would not know the task nor where a run lies.
* ``evaluators.json``: per evaluator key, how it scored: name, kind, version, output
  parameters, the content fingerprints of the local weights it loaded, and whether it is a
  stand-in (``stand_in`` on its class: the test kit's, a demo's).  A report says from it which
  rows were scored with a benchmark's official settings.

Both are merged with what earlier evaluations of the run directory wrote (a system or evaluator
scored again replaces its entry), as ``scores.jsonl`` is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SYSTEMS_FILE = "systems.json"
EVALUATORS_FILE = "evaluators.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, data: dict[str, Any]) -> None:
    from omnistory_core.engine.store import atomic_write_bytes

    text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True, default=str) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def evaluator_info(evaluator: Any) -> dict[str, Any]:
    """How one evaluator scores (see the module docstring); weights that cannot be read now
    (moved since) are left out rather than failing the evaluation that just ran."""
    from omnistory_core.components import WEIGHTS_KEY

    params = dict(evaluator.output_params())
    weights = params.pop(WEIGHTS_KEY, {})
    return {
        "name": evaluator.name,
        "kind": evaluator.kind,
        "version": evaluator.version,
        "params": json.loads(json.dumps(params, default=str)),
        "weights": dict(weights),
        "stand_in": bool(getattr(type(evaluator), "stand_in", False)),
        "stands_in_for": getattr(type(evaluator), "stands_in_for", None),
    }


def write_run_info(
    run_dir: Path, task: str, systems: Iterable[Any], evaluators: Iterable[Any]
) -> None:
    """Merge this evaluation's task, systems and evaluators into ``run_dir``'s files."""
    run_dir = Path(run_dir)
    known = _read(run_dir / SYSTEMS_FILE)
    entries = dict(known.get("systems") or {}) if known.get("task") == task else {}
    for system in systems:
        describe = getattr(system, "to_dict", None)
        info: Any = describe() if callable(describe) else {"system": str(system.system)}
        entries[str(info["system"])] = info
    _write(run_dir / SYSTEMS_FILE, {"task": task, "systems": dict(sorted(entries.items()))})
    scored = dict(_read(run_dir / EVALUATORS_FILE))
    for evaluator in evaluators:
        scored[evaluator.key()] = evaluator_info(evaluator)
    _write(run_dir / EVALUATORS_FILE, dict(sorted(scored.items())))


def recorded_task(run_dir: Path) -> str | None:
    """The task ``systems.json`` names (None when there is none)."""
    task = _read(Path(run_dir) / SYSTEMS_FILE).get("task")
    return str(task) if task else None


__all__ = [
    "EVALUATORS_FILE",
    "SYSTEMS_FILE",
    "evaluator_info",
    "recorded_task",
    "write_run_info",
]
