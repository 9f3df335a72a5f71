"""``engine.dry_run=true``: plan a run or a ``-m`` sweep without calling or loading any model.

In a sweep each job writes its keys to ``<job dir>/dry_run.json`` and the sweep callback
(:mod:`omnistory_core.run.sweep`) merges them into ``<sweep dir>/sweep_plan.json`` and prints the
table; a single run writes and prints its own.  The planning itself is
:mod:`omnistory_core.engine.dryrun`; with ``evaluation.metrics`` / ``judges`` set, the sweep's
plan also has a row per evaluator, planned by :mod:`omnistory_eval.plan` (a single run
does not evaluate, and its plan says so).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("omnistory")


def plan_settings(cfg: DictConfig) -> Any:
    from omnistory_core.engine.dryrun import PlanSettings
    from omnistory_core.errors import ConfigError

    node = cfg.engine.get("plan")
    plain = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    try:
        return PlanSettings.from_config(plain if isinstance(plain, Mapping) else {})
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _job_number() -> tuple[bool, int]:
    """Whether this job is one of a ``-m`` sweep, and its number there."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hydra = HydraConfig.get()
    except Exception:  # noqa: BLE001 - not inside a Hydra app
        return False, 0
    multirun = hydra.mode == RunMode.MULTIRUN
    return multirun, int(hydra.job.num) if multirun and hydra.job.num is not None else 0


def dry_run_system(
    cfg: DictConfig,
    system: Any,
    components: dict[str, Any],
    examples: list[Any],
    output_dir: Path,
) -> dict[str, Any]:
    """Plan one system's job (``system``: its :class:`~omnistory_core.engine.system.SystemPlan`):
    its keys (in a sweep) or the whole plan (a single run)."""
    from omnistory_core.data.cache import dataset_spec, load_examples
    from omnistory_core.engine.dryrun import (
        JOB_FILE,
        ReadOnlyStore,
        merge_plans,
        plan_job,
        render_plan,
        write_plan,
    )
    from omnistory_core.engine.isolation import maybe_isolate
    from omnistory_core.engine.store import atomic_write_bytes

    settings = plan_settings(cfg)
    system_id = system.system_id
    store_root = Path(cfg.engine.store).resolve()
    # as the run wraps them (a worker's component checks only its interpreter here); starts nothing
    components = {
        group: maybe_isolate(component, system.specs[group].get("runner"), store_root)
        for group, component in components.items()
    }
    job = plan_job(
        examples=examples,
        components=components,
        store=ReadOnlyStore(store_root),
        retry_failures=cfg.engine.retry_failures,
        settings=settings,
    )
    spec = dataset_spec(cfg)
    multirun, number = _job_number()
    job.update(
        system_id=system_id,
        job=number,
        # what the end-of-sweep evaluation reads from the manifest, for its plan
        dataset={"spec": spec, "fingerprint": load_examples(spec)[1]},
        store=str(store_root),
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    if multirun:
        atomic_write_bytes(output_dir / JOB_FILE, (json.dumps(job) + "\n").encode("utf-8"))
        log.info("dry run: %s planned (%s)", system_id, output_dir / JOB_FILE)
        return job
    plan = merge_plans([job], settings)
    plan["notes"] += evaluation_note(cfg)
    path = write_plan(output_dir, plan)
    print(render_plan(plan, title=f"dry run of {system_id}"), flush=True)
    log.info("dry run: %s", path)
    return plan


def evaluation_settings(cfg: DictConfig) -> dict[str, Any] | None:
    """``evaluation`` as :func:`omnistory_core.run.sweep.finish_sweep` reads it, or None when
    no metric or judge is set."""
    node = cfg.get("evaluation")
    evaluation = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    if not isinstance(evaluation, Mapping):
        return None
    metrics = [str(m) for m in evaluation.get("metrics") or []]
    judges = [str(j) for j in evaluation.get("judges") or []]
    if not metrics and not judges:
        return None
    return {
        "metrics": metrics,
        "judges": judges,
        "overrides": [str(o) for o in evaluation.get("overrides") or []],
        "allow_partial": bool(evaluation.get("allow_partial", False)),
    }


def evaluation_note(cfg: DictConfig) -> list[str]:
    """A single run's note: it does not evaluate (only a ``-m`` sweep does, at its end)."""
    if evaluation_settings(cfg) is None:
        return []
    return [
        "evaluation.metrics / evaluation.judges are set, but a single run does not evaluate (the"
        " evaluation runs at the end of a -m sweep): no evaluator is planned. `python -m"
        " omnistory_core evaluate RUN_DIR` scores the run afterwards; a -m dry run plans it."
    ]


def finish_dry_run(config: DictConfig, sweep_dir: Path) -> int:
    """End of a dry-run sweep: merge the jobs' keys, plan the end-of-sweep evaluation when
    ``evaluation.metrics`` / ``judges`` are set (:mod:`omnistory_eval.plan`), write
    ``sweep_plan.json``, print the table.  Returns 2 when the evaluation could not start as
    configured (an unknown evaluator, a bad setting: one line, nothing written), 1 when a job
    failed (its ``job_error.json``), else 0."""
    from omnistory_core.engine.dryrun import (
        PLAN_FILE,
        PlanSettings,
        add_components,
        merge_plans,
        read_job_plans,
        render_plan,
        write_plan,
    )
    from omnistory_core.errors import ConfigError

    failed = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/job_error.json"))]
    try:
        settings = plan_settings(config)
    except ConfigError:  # every job said so in its job_error.json
        settings = PlanSettings()
    plan = merge_plans(read_job_plans(sweep_dir), settings)
    evaluation = evaluation_settings(config)
    if evaluation is not None:
        from omnistory_core.plugins import load_plugins

        try:
            planned = (
                load_plugins()
                .evaluation_service()
                .plan(sweep_dir, evaluation=evaluation, settings=settings)
            )
        except ConfigError as exc:
            (sweep_dir / PLAN_FILE).unlink(missing_ok=True)  # no plan rather than a stale one
            print(f"omnistory: error: evaluation: {exc}", file=sys.stderr)
            return 2
        except Exception as exc:  # Hydra would only warn about it: never a silent success
            (sweep_dir / PLAN_FILE).unlink(missing_ok=True)
            log.exception("dry run: planning the evaluation failed")
            print(
                f"omnistory: error: evaluation: planning it failed: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
            return 1
        add_components(plan, planned.rows, settings)
        plan["evaluation_cannot_run_here"] = planned.cannot_run_here
        plan["notes"] += planned.notes
    plan["failed_jobs"] = failed
    path = write_plan(sweep_dir, plan)
    print(render_plan(plan, title=f"dry run of sweep {sweep_dir.name}"), flush=True)
    log.info("dry run: %s", path)
    for job in failed:
        log.error("job %s failed: %s", job["system_id"], job["error"])
    return 1 if failed else 0
