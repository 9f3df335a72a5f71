"""What a task with its own generation gives the test kit: its fixture's examples and inputs, a
component run over them through a store the way its jobs run it, and the job records that run
leaves (``Task.harness``).

``omnistory_testkit.check_component(cls, task=NAME)`` and the test kit's engine helpers
(``fixture_items``, ``run_task_component``) drive a component through this, so a task whose
records are not the story-continuation contract (ViStoryBench: shots -> one image each) is
checked on its own fixture with the same checks as Omni-StoryBench's components on the demo.
A task whose generation is the core's (``Task.generate`` None) needs none: the core's engine is
its harness.

A harness is built per check and holds no state between calls but the loaded fixture; everything
it returns is plain data or the engine's records (:class:`~omnistory_core.kit.jobs.CallRecord`,
:class:`~omnistory_core.api.Failure`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class HarnessExample:
    """One record of the fixture: its id, its index (the stage's), and its group (a story)."""

    id: str
    index: int
    group: str


@dataclass
class HarnessRun:
    """A component run over the fixture: per example id its record (a ``CallRecord``, or the
    ``Failure`` that blocked the call), its ``ComponentStats``, the component built and run, and
    the run's state :meth:`TaskHarness.write_job` needs."""

    records: dict[str, Any]
    stats: Any
    component: Any
    state: Any = None
    keys: dict[str, str] = field(default_factory=dict)


class TaskHarness(Protocol):
    """The test kit's view of a task's generation (see the module docstring).

    ``config`` is a job config as the task's ``generate`` reads it (plain dicts: the component's
    group node ``{"name": ..., **params}``, the groups the task's system needs around it, and
    ``seed``); ``registry`` the plugin registry the components come from (the test kit's, which
    holds the class under test).  ``per_group``: how many records of each group of the fixture
    to use (``None``: all)."""

    task: str

    def examples(self, per_group: int | None) -> list[HarnessExample]: ...

    def items(self, per_group: int | None, kind: str) -> dict[str, dict[str, Any]]:
        """Per example id, every input a ``kind`` component may read (before any upstream
        stage: the plan fields are the task's own)."""
        ...

    def system(self, kind: str, node: Mapping[str, Any], seed: int) -> dict[str, Any]:
        """The job config of the smallest system around a ``kind`` component (its node): the
        built-in components the task completes it with."""
        ...

    def run(
        self,
        registry: Any,
        config: Mapping[str, Any],
        kind: str,
        store: Any,
        *,
        per_group: int | None,
        retry_failures: bool | str = False,
    ) -> HarnessRun:
        """Build the system of ``config`` from ``registry`` and run it over the fixture through
        ``store`` as a job does; the records are those of its ``kind`` component."""
        ...

    def call_keys(
        self, registry: Any, config: Mapping[str, Any], kind: str, *, per_group: int | None
    ) -> dict[str, str]:
        """Per example id, the call key of the ``kind`` component on it, computed without calling
        anything (the component is built, not loaded)."""
        ...

    def write_job(self, run: HarnessRun, job_dir: Path) -> dict[str, dict[str, Any]]:
        """Write ``run``'s job directory as a job does; per example id what its records file says
        of the example's output (``status``, ``category``, ``message``)."""
        ...

    def standin_run(self, root: Path) -> list[Path]:
        """Complete job directories of built-in systems over the whole fixture, every output
        present, under ``root``: what an evaluator is checked on."""
        ...


__all__ = ["HarnessExample", "HarnessRun", "TaskHarness"]
