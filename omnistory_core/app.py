"""The Hydra application: one job per system configuration, plus sweep-level callbacks."""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from omnistory_core.secrets import install_log_filter, redact

log = logging.getLogger("omnistory")

_DATASET_CACHE: dict[str, tuple[list, str]] = {}


def dataset_spec(cfg: DictConfig) -> dict[str, Any]:
    return OmegaConf.to_container(cfg.dataset, resolve=True)  # type: ignore[return-value]


def load_examples(spec: Mapping[str, Any]):
    """Load and validate a dataset once per process; returns (examples, fingerprint)."""
    from omnistory_core.data import fingerprint
    from omnistory_core.plugins import load_plugins

    cache_key = json.dumps(spec, sort_keys=True, default=str)
    if cache_key not in _DATASET_CACHE:
        registry = load_plugins()
        name = str(spec.get("name"))
        if name not in registry.datasets:
            from omnistory_core.data import DatasetError

            raise DatasetError(
                f"no dataset named {name!r}; known: {', '.join(sorted(registry.datasets))}"
            )
        examples = registry.datasets[name](dict(spec))
        _DATASET_CACHE[cache_key] = (examples, fingerprint(examples))
    return _DATASET_CACHE[cache_key]


def git_revision() -> str | None:
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


@contextmanager
def progress_bars(enabled: bool):
    """Yield ``progress(label, total) -> advance(n)`` backed by rich progress bars on stderr."""
    if not enabled:
        yield lambda label, total: lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal and False,
    ) as bars:

        def progress(label: str, total: int):
            task = bars.add_task(label, total=total)
            return lambda n: bars.advance(task, n)

        yield progress


def component_manifest(component, registry) -> dict[str, Any]:
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


def named_on_command_line() -> set[str]:
    """Groups whose component was named by a ``<group>.name=...`` override of this job."""
    try:
        from hydra.core.hydra_config import HydraConfig

        overrides = list(HydraConfig.get().overrides.task)
    except Exception:  # noqa: BLE001 - not inside a Hydra app (tests calling run directly)
        return set()
    named = set()
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        group, _, leaf = key.partition(".")
        if leaf == "name":
            named.add(group)
    return named


def run(cfg: DictConfig, output_dir: Path) -> dict[str, Any]:
    """Run one system over the dataset and write its job directory."""
    from omnistory_core.engine.isolation import maybe_isolate
    from omnistory_core.engine.job import build_component, run_job, source_group
    from omnistory_core.engine.outputs import materialize
    from omnistory_core.engine.store import Store, atomic_write_bytes
    from omnistory_core.engine.system import resolve_system
    from omnistory_core.plugins import load_plugins

    started = time.time()
    install_log_filter()
    registry = load_plugins()
    plain_cfg = OmegaConf.to_container(cfg, resolve=True)
    for group in named_on_command_line():
        if isinstance(plain_cfg.get(group), dict):
            plain_cfg[group].pop("default_choice", None)  # `++tts.name=espeak` is a choice
    system = resolve_system(plain_cfg, registry)  # refuses incoherent systems before any load
    spec = dataset_spec(cfg)
    examples, fingerprint = load_examples(spec)
    components = {
        group: build_component(
            registry, group, node, seed=int(cfg.seed), allow_oracle=bool(cfg.allow_oracle)
        )
        for group, node in system.specs.items()
    }
    store = Store(Path(cfg.engine.store).resolve())
    for group, node in system.specs.items():
        components[group] = maybe_isolate(components[group], node.get("runner"), store.root)
    source = source_group(components)
    oracle = any(c.oracle for c in components.values())
    system_id = system.system_id
    label = f"{system_id}{' [ORACLE]' if oracle else ''}"
    log.info("system %s: %d examples from dataset %s", label, len(examples), spec.get("name"))
    with progress_bars(bool(cfg.engine.progress)) as progress:
        result = run_job(
            examples=examples,
            components=components,
            store=store,
            retry_failures=cfg.engine.retry_failures,
            progress=progress,
        )
    missing = materialize(output_dir, result, store)
    manifest = {
        "status": "complete",
        "system_id": system_id,
        "oracle": oracle,
        "paradigm": system.paradigm,
        "stages": list(components),
        "components": {s: component_manifest(c, registry) for s, c in components.items()},
        "dataset": {**spec, "n_examples": len(examples), "fingerprint": fingerprint},
        "seed": int(cfg.seed),
        "store": str(store.root),
        "n_examples": len(examples),
        "missing": missing,
        "narration_chars": narration_lengths(result),
        # usage behind this job's outputs (cached or not) and what this run actually spent
        "usage": {source: sum_usage(result.plans)},
        "usage_this_run": {
            source: sum_usage(result.plans, result.stats[components[source].key()].computed)
        },
        "stats": {k: s.to_dict() for k, s in sorted(result.stats.items())},
        "config": plain_cfg,
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
    text = json.dumps(redact(manifest), indent=2, ensure_ascii=False, default=str) + "\n"
    atomic_write_bytes(output_dir / "manifest.json", text.encode("utf-8"))
    log.info(
        "wrote %s (missing: text %d, image %d, speech %d)",
        output_dir,
        missing["text"],
        missing["image"],
        missing["speech"],
    )
    from omnistory_core.engine.failures import check_missing

    check_missing(missing, cfg.engine.get("fail_on_missing", False))
    return manifest


def sum_stats(job_dirs: list[Path]) -> dict[str, Any]:
    totals: dict[str, dict[str, int]] = {}
    for job in job_dirs:
        path = job / "stats.json"
        if not path.exists():
            continue
        for key, counts in json.loads(path.read_text())["components"].items():
            acc = totals.setdefault(key, {"calls": 0, "cache_hits": 0, "failures": 0, "loads": 0})
            for k in acc:
                acc[k] += int(counts.get(k, 0))
    return {"components": dict(sorted(totals.items())), "jobs": len(job_dirs)}


def job_dirs(sweep_dir: Path) -> list[Path]:
    return sorted(p.parent for p in sweep_dir.glob("*/stats.json"))


try:
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object  # type: ignore[assignment,misc]


class SweepCallback(Callback):  # type: ignore[misc]
    """Validates the dataset before any job starts and sums job stats at the end of a sweep."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        install_log_filter()
        load_examples(dataset_spec(config))  # raises DatasetError before any generation

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from omnistory_core.engine.store import atomic_write_bytes

        sweep_dir = Path(config.hydra.sweep.dir)
        stats = sum_stats(job_dirs(sweep_dir))
        failed = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/job_error.json"))]
        stats["failed_jobs"] = failed
        atomic_write_bytes(
            sweep_dir / "sweep_stats.json", (json.dumps(stats, indent=2) + "\n").encode()
        )
        log.info("sweep stats: %s", sweep_dir / "sweep_stats.json")
        status = finish_sweep(config, sweep_dir)
        if failed:
            for job in failed:
                log.error("job %s failed: %s", job["system_id"], job["error"])
            raise SystemExit(1)
        if status:
            raise SystemExit(status)


def finish_sweep(config: DictConfig, run_dir: Path) -> int:
    """End of a sweep: evaluation (if configured), then the report from whatever is scored.
    Returns the evaluation's exit status (2: its pre-flight stopped it, 1: 'error' rows remain)."""
    evaluation = OmegaConf.to_container(config.evaluation, resolve=True)
    metrics, judges = list(evaluation.get("metrics") or []), list(evaluation.get("judges") or [])
    scores = run_dir / "scores.jsonl"
    status = 0
    if metrics or judges:
        from omnistory_core.evaluation.command import evaluate_and_summarize

        # pre-flight problems or remaining 'error' rows fail the sweep, after its report
        status, _ = evaluate_and_summarize(
            run_dir,
            metrics=metrics,
            judges=judges,
            overrides=list(evaluation.get("overrides") or []),
            progress_enabled=bool(config.engine.progress),
            allow_partial=bool(evaluation.get("allow_partial", False)),
        )
        log.info("scores: %s", scores)
    if evaluation.get("report", True):
        from omnistory_core.report.command import build_report

        try:
            out = build_report(
                scores, run_dir / "report", run_dir=run_dir, print_table=bool(metrics or judges)
            )
        except Exception:  # the sweep's outputs are complete; only the report is missing
            log.exception(
                "building the report failed; the sweep outputs are complete. Rebuild it with "
                "`python -m omnistory_core report --scores %s --out %s --run-dir %s`",
                scores,
                run_dir / "report",
                run_dir,
            )
        else:
            log.info("report: %s", out / "index.html")
    return status


def output_dir_of_current_job() -> Path:
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


def _user_errors() -> tuple[type[Exception], ...]:
    from omnistory_core.data import DatasetError
    from omnistory_core.engine.job import ConfigError
    from omnistory_core.plugins import PluginError

    return (ConfigError, DatasetError, PluginError)


@contextmanager
def explain_missing_configs():
    """While Hydra runs: a config it cannot find (``Could not find 'system/x'``) also names the
    plugins that failed to load, which may ship it, and how to see why.

    Hydra reports its own errors (``run_and_report`` prints the message and exits 1) before any
    omnistory code sees them, so the message is extended on its way there.  Hydra is pinned to
    1.3, where ``_run_hydra`` calls ``run_and_report`` through its module.
    """
    import hydra._internal.utils as hydra_utils

    original = hydra_utils.run_and_report

    def run_and_report(func):
        return original(lambda: _with_plugin_hint(func))

    hydra_utils.run_and_report = run_and_report
    try:
        yield
    finally:
        hydra_utils.run_and_report = original


def _with_plugin_hint(func):
    from hydra.errors import ConfigCompositionException, MissingConfigException

    from omnistory_core.plugins import missing_config_hint

    try:
        return func()
    except ConfigCompositionException as exc:
        hint = missing_config_hint(str(exc))
        if hint is None:
            raise
        # right under Hydra's first line, before its long list of options and search path
        first, _, rest = str(exc).partition("\n")
        message = f"{first}\n{hint}\n{rest}" if rest else f"{first}\n{hint}"
        if isinstance(exc, MissingConfigException):
            raise MissingConfigException(message, exc.missing_cfg_file, exc.options) from (
                exc.__cause__
            )
        raise ConfigCompositionException(message) from exc.__cause__


def task(cfg: DictConfig) -> None:
    """Hydra task: one system.  A configuration error is one clear line, not a traceback; in a
    sweep it is recorded in the job directory (``job_error.json``) and the other jobs go on."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from omnistory_core.engine.store import atomic_write_bytes

    output_dir = output_dir_of_current_job()
    error_file = output_dir / "job_error.json"
    if error_file.exists():
        error_file.unlink()
    try:
        run(cfg, output_dir)
    except _user_errors() as exc:
        print(f"omnistory: error: {cfg.system_id}: {exc}", file=sys.stderr)
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            raise SystemExit(2) from None
        record = {"system_id": str(cfg.system_id), "error": f"{type(exc).__name__}: {exc}"}
        atomic_write_bytes(error_file, (json.dumps(redact(record), indent=2) + "\n").encode())


os.environ.setdefault("HYDRA_FULL_ERROR", "0")
