"""A task is a benchmark: what its records are, what a system may read and must produce, how
its outputs lie on disk, and how its scores are aggregated.

Tasks are plugins (``register_tasks``), selected by the ``task`` config group
(``task=omnistorybench``, the default).  Generic modules ask the selected task instead of naming a
benchmark; ``python -m omnistory_core tasks`` lists the installed ones.  Plain data, no heavy
imports: a task's loaders, layouts and tables are named here and imported when used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

#: where an evaluator's score applies: one item (an Omni-StoryBench transition, a ViStoryBench
#: shot), one group of items (a story) or the whole run (Inception Score)
Scope = Literal["item", "group", "run"]
SCOPES: tuple[str, ...] = ("item", "group", "run")


@dataclass(frozen=True)
class OutputSlot:
    """One output a system makes per item: its name and media kind (``text|image|speech``)."""

    name: str
    media: str


@dataclass(frozen=True)
class Track:
    """A group of criteria that judges score together (``text`` with its four criteria)."""

    name: str
    criteria: tuple[str, ...] = ()


@dataclass(frozen=True)
class Column:
    """A leaderboard column: a label and the cell it reads (evaluator, criterion, track)."""

    label: str
    evaluator: str
    criterion: str = ""
    track: str = ""
    higher_is_better: bool = True
    scale: float = 1.0


@dataclass(frozen=True)
class Aggregation:
    """How the scores table becomes a leaderboard: its columns, the policies every number is
    computed under, and the derived columns (their definitions in words)."""

    columns: tuple[Column, ...] = ()
    policies: tuple[str, ...] = ("valid_only", "zero_filled")
    derived: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PaperTable:
    """One table or figure of a paper: its slug, title and what it needs to be built."""

    slug: str
    title: str
    needs: tuple[str, ...] = ("scores",)


class EvaluationUnit(Protocol):
    """One unit an evaluator scores (what :attr:`Task.evaluation` returns, per scope):
    ``example_id`` is the item id, the group id or ``""`` for the run; ``pool`` holds the
    inputs evaluators may ``reads``; ``missing`` the candidate inputs the system did not produce
    (an evaluator reading one gets ``missing_output`` rows and makes no call)."""

    @property
    def system(self) -> str: ...
    @property
    def example_id(self) -> str: ...
    @property
    def pool(self) -> Mapping[str, Any]: ...
    @property
    def missing(self) -> AbstractSet[str]: ...


class TaskEvaluation(Protocol):
    """What :attr:`Task.evaluation` returns.  ``units``: scope (``item|group|run``) -> its
    units; ``systems``: one entry per system scored; ``store``: the store the job directories
    recorded (None: ``<run dir>/store``).  Optional, for the dry run:
    ``planned_requests(evaluator, unit) -> (requests, upper_bound) | None`` (the judge requests
    one call makes) and ``request_notes(evaluators, rows) -> [str]`` (what those counts mean)."""

    @property
    def units(self) -> Mapping[str, Sequence[EvaluationUnit]]: ...
    @property
    def systems(self) -> Sequence[Any]: ...
    @property
    def store(self) -> str | None: ...


@dataclass(frozen=True)
class Task:
    """A benchmark's declaration.  ``load`` maps the ``dataset`` config to records (each with an
    ``id``; ``group`` is the story or book); ``inputs`` are the names a generation component
    may ``reads``; ``reference_inputs`` only evaluators and oracles see; ``outputs`` the slots a
    system fills per item; ``layout`` names the on-disk layout its job directory follows;
    ``systems`` the shapes components compose into; ``tracks``, ``evaluators`` and
    ``aggregation`` how it is scored; ``tables`` the paper's tables; ``generate`` how one job
    runs."""

    name: str
    version: str
    description: str
    datasets: tuple[str, ...]
    record: str
    inputs: tuple[str, ...]
    reference_inputs: tuple[str, ...]
    outputs: tuple[OutputSlot, ...]
    layout: str
    systems: tuple[str, ...]
    tracks: tuple[Track, ...]
    evaluators: Mapping[str, Scope] = field(default_factory=dict)
    aggregation: Aggregation = field(default_factory=Aggregation)
    tables: tuple[PaperTable, ...] = ()
    load: Callable[[Mapping[str, Any]], list[Any]] | None = None
    #: how one job of this task runs: ``generate(cfg, output_dir) -> manifest``; None: the
    #: core's generation of the story-continuation contract (:func:`run.generate.run_system`).
    #: A task whose records or outputs differ (ViStoryBench: shots -> one image each) brings its
    #: own, built from the engine's stages, store and layout helpers.
    generate: Callable[[Any, Any], dict[str, Any]] | None = None
    #: how the evaluation reads this task's outputs: ``evaluation(job_dirs, config)`` with the
    #: paths of the complete job directories of a run directory (their manifests name this
    #: task) and ``config`` = ``{"outputs": an external outputs tree in the task's layout or
    #: None, "dataset": dataset options given on the command line (they override a
    #: manifest's)}``; it returns a :class:`TaskEvaluation`.  The runner
    #: (the evaluation distribution's ``runner.evaluate_task``) gives each evaluator the units of
    #: its ``scope``, with the same keys, store and statuses as Omni-StoryBench's.  Bad input is
    #: a :class:`~omnistory_core.errors.UserError` naming the folder or file.  None: the core's
    #: story-continuation pools (one item per transition, the job directory of
    #: :mod:`omnistory_core.jobdir`).
    evaluation: Callable[..., Any] | None = None
    #: how ``report --task NAME`` and the end of a sweep build this task's report:
    #: ``report(out_dir, scores=..., run_dir=..., options=...) -> out_dir``; None: the report
    #: distribution's Omni-StoryBench report.
    report: Callable[..., Any] | None = None
    #: the name of a job's directory (``hydra.run.dir``'s and ``hydra.sweep.subdir``'s last
    #: level): ``job_name(cfg) -> str`` from the composed config (its ``hydra.overrides.task``
    #: included).  Two jobs that would overwrite each other's outputs must get two names; None:
    #: the ``system_id``.  ViStoryBench adds the run's mode, language, split and seed, so the
    #: same method in ``en`` and ``ch`` lands in two directories of one method.
    job_name: Callable[[Any], str] | None = None
    #: ``python -m omnistory_core export --task NAME RUN_DIR --out DIR``: the scored runs of a run
    #: directory written in the benchmark's official result formats,
    #: ``export(run_dir, out_dir, options) -> out_dir``; None: the task has no export.
    export: Callable[..., Any] | None = None

    @property
    def track_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tracks)

    def criteria(self, track: str) -> tuple[str, ...]:
        for t in self.tracks:
            if t.name == track:
                return t.criteria
        raise KeyError(f"task {self.name!r} has no track {track!r}; tracks: {self.track_names}")

    def describe(self) -> dict[str, Any]:
        """What ``python -m omnistory_core tasks --json`` prints for this task."""
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "datasets": list(self.datasets),
            "record": self.record,
            "inputs": list(self.inputs),
            "reference_inputs": list(self.reference_inputs),
            "outputs": {s.name: s.media for s in self.outputs},
            "layout": self.layout,
            "systems": list(self.systems),
            "tracks": {t.name: list(t.criteria) for t in self.tracks},
            "evaluators": dict(self.evaluators),
            "leaderboard": [c.label for c in self.aggregation.columns],
            "policies": list(self.aggregation.policies),
            "tables": [t.slug for t in self.tables],
        }


DEFAULT_TASK = "omnistorybench"


def job_name_of(cfg: Any) -> str:
    """The directory name of a job of ``cfg`` (``${omnistory_job_name:}`` in the primary config):
    its task's :attr:`Task.job_name`, else its ``system_id``."""
    from omnistory_core.errors import UserError

    system_id = str(cfg.get("system_id"))
    try:
        task = selected_task(cfg)
    except UserError:  # an unknown task: the job says so in one line when it starts
        return system_id
    return str(task.job_name(cfg)) if task.job_name is not None else system_id


def dataset_task(name: str) -> str | None:
    """The installed task that declares the dataset ``name`` (``Task.datasets``); None when no
    task does (a third-party dataset of story-continuation records, say)."""
    from omnistory_core.plugins import load_plugins

    for task in load_plugins().tasks.values():
        if name in task.datasets:
            return str(task.name)
    return None


def selected_task(cfg: Any = None) -> Task:
    """The task a config selects (``task.name``; the default when the config has none)."""
    from omnistory_core.plugins import load_plugins

    name = DEFAULT_TASK
    if cfg is not None:
        node = cfg.get("task") if hasattr(cfg, "get") else None
        if node is not None:
            name = str(node.get("name", DEFAULT_TASK) if hasattr(node, "get") else node)
    return load_plugins().task(name)


__all__ = [
    "DEFAULT_TASK",
    "SCOPES",
    "Aggregation",
    "Column",
    "EvaluationUnit",
    "OutputSlot",
    "PaperTable",
    "Scope",
    "Task",
    "TaskEvaluation",
    "Track",
    "dataset_task",
    "job_name_of",
    "selected_task",
]
