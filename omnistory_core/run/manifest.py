"""A job's ``manifest.json``: resolved config (secrets redacted), components and their plugins,
dataset fingerprint, seed, usage, stats, versions and where it ran."""

from __future__ import annotations

import platform
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omnistory_core.redaction import redact


def git_revision() -> str | None:
    """The git revision of the omnistory_core source tree, or None outside a checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def component_manifest(component, registry) -> dict[str, Any]:
    """Name, version, output-changing parameters and the plugin distribution of one component."""
    plugin = registry.plugins.get(registry.origins.get((component.kind, component.name), ""))
    return {
        "name": component.name,
        "version": component.version,
        "oracle": component.oracle,
        "reads": list(component.reads),
        "params": component.output_params(),
        "plugin": plugin.name if plugin else None,
        "distribution": plugin.distribution if plugin else None,
        "distribution_version": plugin.version if plugin else None,
        "runner_python": getattr(component, "python", None),
    }


def sum_usage(plans, computed: set[str] | None = None) -> dict[str, float]:
    """Sum numeric usage over distinct planner calls (optionally only those computed now)."""
    total: dict[str, float] = {}
    seen: set[str] = set()
    for outcome in plans.values():
        if outcome.key in seen or (computed is not None and outcome.key not in computed):
            continue
        seen.add(outcome.key)
        for k, v in (outcome.usage or {}).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                total[k] = total.get(k, 0) + v
    return total


def expert_usage(
    result, components: Mapping[str, Any], this_run: bool = False
) -> dict[str, dict[str, float]]:
    """Per expert stage whose calls report usage (a hosted image model): its summed usage over
    distinct calls; ``this_run``: only the calls computed now.  Stages without any are left out."""
    out: dict[str, dict[str, float]] = {}
    for stage, records in result.media.items():
        component = components.get(stage)
        stats = result.stats.get(component.key()) if component is not None else None
        computed = stats.computed if this_run and stats is not None else None
        calls = {v.key: v for v in records.values() if hasattr(v, "key") and v.usage}
        if this_run and computed is None:
            continue
        total = sum_usage(calls, computed)
        if total:
            out[stage] = total
    return out


def narration_lengths(result) -> dict[str, float]:
    """Unicode characters of the generated narrations (after trimming): VLM planners tend to write
    twice the benchmark's ~107-character references, which costs BERTScore."""
    from omnistory_core.engine.outputs import text_outcome

    lengths = sorted(
        len(t.strip())
        for ex in result.examples
        if isinstance(t := text_outcome(result, ex.index), str)
    )
    if not lengths:
        return {"n": 0}
    return {
        "n": len(lengths),
        "mean": round(sum(lengths) / len(lengths), 2),
        "median": float(
            lengths[len(lengths) // 2]
            if len(lengths) % 2
            else (lengths[len(lengths) // 2 - 1] + lengths[len(lengths) // 2]) / 2
        ),
        "min": lengths[0],
        "max": lengths[-1],
    }


def job_manifest(
    *,
    system,
    components: Mapping[str, Any],
    registry,
    result,
    store,
    spec: Mapping[str, Any],
    n_examples: int,
    fingerprint: str,
    seed: int,
    missing: Mapping[str, int],
    config: Mapping[str, Any],
    started: float,
) -> dict[str, Any]:
    """The manifest of one finished job (not yet redacted)."""
    from omnistory_core.engine.job import source_group

    source = source_group(components)
    return {
        "status": "complete",
        "system_id": system.system_id,
        "oracle": any(c.oracle for c in components.values()),
        "paradigm": system.paradigm,
        "stages": list(components),
        "components": {s: component_manifest(c, registry) for s, c in components.items()},
        "dataset": {**spec, "n_examples": n_examples, "fingerprint": fingerprint},
        "seed": seed,
        "store": str(store.root),
        "n_examples": n_examples,
        "missing": dict(missing),
        "narration_chars": narration_lengths(result),
        # usage behind this job's outputs (cached or not) and what this run actually spent
        "usage": {source: sum_usage(result.plans), **expert_usage(result, components)},
        "usage_this_run": {
            source: sum_usage(result.plans, result.stats[components[source].key()].computed),
            **expert_usage(result, components, this_run=True),
        },
        "stats": {k: s.to_dict() for k, s in sorted(result.stats.items())},
        "config": dict(config),
        **environment_manifest(registry, started),
    }


def environment_manifest(registry: Any, started: float) -> dict[str, Any]:
    """What every job's manifest ends with, whatever the task: the plugins and their versions,
    the git revision, the interpreter and platform, the command, when it started and how long
    it took."""
    return {
        "plugins": {
            name: {"distribution": p.distribution, "version": p.version, "error": p.error}
            for name, p in sorted(registry.plugins.items())
        },
        "omnistory_core_version": registry.plugins["builtin"].version,
        "git_revision": git_revision(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "command": sys.argv,
        "started": started,
        "seconds": round(time.time() - started, 3),
    }


def write_manifest(output_dir: Path, manifest: Mapping[str, Any]) -> Path:
    """Write ``manifest.json`` atomically, secrets redacted."""
    from omnistory_core.jobdir import write_manifest as write

    return write(output_dir, redact(dict(manifest)))
