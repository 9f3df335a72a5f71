"""The evaluation the core's sweep callback and dry run call (its ``EvaluationService``).

The sweep directory's task decides what is scored, as for ``evaluate``: Omni-StoryBench's pools,
or the units of a task with its own ``evaluation`` (ViStoryBench: shots, stories and each system's
run), whose rows carry their ``scope``.

With ``engine.evaluate_sooner`` (:mod:`omnistory_eval.sooner`) the items whose outputs are final
are scored while generation goes on, and the evaluation at the end finds them in the store.

The end-of-sweep evaluation scores on the sweep's devices: ``engine.devices`` and
``engine.device_locks`` as its jobs' manifests recorded them (the sweep's resolved config), so
with two devices or more every metric and judge that needs a GPU runs on replicas spread over
them, after the sweep's warm pool has given their memory back.  An ``evaluation`` mapping may
name others (``devices``, ``device_locks``), as ``evaluate engine.devices=...`` does.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any


def _names(evaluation: dict[str, Any], key: str) -> list[str]:
    return [str(v) for v in evaluation.get(key) or []]


def _engine(evaluation: dict[str, Any]) -> dict[str, Any]:
    """The device settings an ``evaluation`` mapping names itself (else the manifests')."""
    return {k: evaluation[k] for k in ("devices", "device_locks") if k in evaluation}


class SweepEvaluation:
    """Checks evaluator names before a sweep, scores it at its end, plans it in a dry run."""

    def check(self, metrics: list[str], judges: list[str]) -> None:
        from omnistory_eval.evaluators import check_evaluator_names

        check_evaluator_names(metrics, judges)

    def run(self, sweep_dir: Path, *, evaluation: dict[str, Any], progress: bool) -> int:
        from omnistory_eval.command import evaluate_and_summarize
        from omnistory_eval.sooner import take_prior

        status, _ = evaluate_and_summarize(
            sweep_dir,
            metrics=_names(evaluation, "metrics"),
            judges=_names(evaluation, "judges"),
            overrides=_names(evaluation, "overrides"),
            progress_enabled=progress,
            allow_partial=bool(evaluation.get("allow_partial", False)),
            engine=_engine(evaluation),
            prior=take_prior(sweep_dir),
        )
        logging.getLogger("omnistory").info("scores: %s", sweep_dir / "scores.jsonl")
        return status

    def sooner(
        self,
        sweep_dir: Path,
        *,
        evaluation: dict[str, Any],
        store: Path,
        task: str | None,
        engine: dict[str, Any],
    ) -> Any:
        """The stream that scores a sweep's final outputs while generation goes on
        (:class:`omnistory_eval.sooner.SoonerEvaluation`); :meth:`run` at the sweep's end
        counts what it computed."""
        from omnistory_eval.sooner import SoonerEvaluation

        return SoonerEvaluation(
            sweep_dir, evaluation=evaluation, store=store, task=task, engine=engine
        )

    def plan(self, sweep_dir: Path, *, evaluation: dict[str, Any], settings: Any) -> Any:
        from omnistory_eval.plan import plan_sweep_evaluation

        return plan_sweep_evaluation(
            sweep_dir,
            metrics=_names(evaluation, "metrics"),
            judges=_names(evaluation, "judges"),
            overrides=_names(evaluation, "overrides"),
            allow_partial=bool(evaluation.get("allow_partial", False)),
            settings=settings,
        )
