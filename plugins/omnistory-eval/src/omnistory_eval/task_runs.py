"""Which task a run directory holds and what its evaluation reads: shared by ``evaluate``
(:mod:`omnistory_eval.command`) and its dry run (:mod:`omnistory_eval.plan`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnistory_core.errors import ConfigError
from omnistory_core.tasks import DEFAULT_TASK, Task


class EvaluationInputError(ConfigError):
    """A run that cannot be evaluated as asked (one line, exit 2)."""


def run_task(run_dir: Path, task_name: str | None, outputs: Path | None) -> Task:
    """The task whose outputs are evaluated: ``--task``, else the one every job directory of
    ``run_dir`` names (Omni-StoryBench when none does); mixed tasks are refused."""
    from omnistory_core.plugins import load_plugins
    from omnistory_eval.runner import discover_manifests

    registry = load_plugins()
    found = {job.task for job in discover_manifests(run_dir)}
    if len(found) > 1:
        raise EvaluationInputError(f"{run_dir}: job directories of several tasks: {sorted(found)}")
    if task_name is None and outputs is not None and not found:
        own = [t.name for t in registry.tasks.values() if t.evaluation is not None]
        raise EvaluationInputError(
            f"--outputs {outputs}: name the task whose layout it follows (--task NAME;"
            f" installed tasks that read one: {', '.join(sorted(own)) or 'none'})"
        )
    if task_name is not None and found and found != {task_name}:
        raise EvaluationInputError(
            f"--task {task_name}: the job directories of {run_dir} are of task {found.pop()}"
        )
    return registry.task(task_name or (found.pop() if found else DEFAULT_TASK))


def task_evaluation_of(
    task: Task,
    run_dir: Path,
    *,
    outputs: Path | None = None,
    dataset: dict[str, Any] | None = None,
    planned: list[Path] | None = None,
) -> Any:
    """What ``task.evaluation`` gives for the complete job directories of ``run_dir`` and an
    external outputs tree: the systems and their units per scope.  ``planned``: job directories
    a dry-run sweep planned (the task reads their plans: ``config["planned"]``)."""
    from omnistory_eval.runner import discover_manifests

    assert task.evaluation is not None
    jobs = [job.path for job in discover_manifests(run_dir)]
    if outputs is not None:
        outputs = outputs.resolve()
        if run_dir.resolve().is_relative_to(outputs):
            raise EvaluationInputError(
                f"{run_dir}: the scores cannot lie inside the outputs tree {outputs} (its"
                " folders would read as methods); name another RUN_DIR"
            )
    elif not jobs and not planned:
        raise EvaluationInputError(
            f"{run_dir}: no complete job directory (manifest.json) of task {task.name} found"
        )
    config: dict[str, Any] = {
        "outputs": str(outputs) if outputs is not None else None,
        "dataset": dataset or {},
    }
    if planned:
        config["planned"] = [str(p) for p in planned]
    return task.evaluation(jobs, config)


def check_scopes(task: Task, evaluators: list[Any], units: dict[str, list[Any]]) -> None:
    """Refuse an evaluator whose inputs the task's units do not have (a metric of another task)."""
    from omnistory_eval.runner import unprovided_inputs

    for evaluator in evaluators:
        problem = unprovided_inputs(evaluator, units)
        if problem is not None:
            scope, names = problem
            raise EvaluationInputError(
                f"{evaluator.key()} reads {', '.join(names)}, which the {scope} units of task"
                f" {task.name} do not provide; its evaluators: {', '.join(task.evaluators)}"
            )
