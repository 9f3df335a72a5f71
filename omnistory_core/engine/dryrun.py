"""Plan a run or sweep before paying for it: ``engine.dry_run=true``.

A dry run builds every component (its constructor validates its parameters; nothing is loaded),
reads the dataset and the store, and computes the cache key of every call the run would make,
without making any: it walks the same stages as :func:`omnistory_core.engine.job.run_job`
(:class:`omnistory_core.engine.walk.JobWalk`), answering each from the store instead:

* first-stage calls (planner or backbone) have real keys: their inputs are the dataset's;
* an expert's call reads plan fields.  When the upstream record is in the store and usable, the
  real plan gives the real key (or no call, when the plan failed); when it is not, the plan field
  is a *symbolic* value naming the upstream call key and the field, so two systems sharing that
  upstream call and that expert get one key, as the real run dedupes them.  The dry run assumes
  every upstream call still to make succeeds: a failed plan means fewer downstream calls.
* a group-unit component (``Component.unit = "group"``) makes one call per group of examples (a
  book), planned and counted once.

Each job of a ``-m`` sweep writes its keys to ``<job dir>/dry_run.json`` (jobs may run in other
processes or on other nodes: files, not memory); the sweep callback merges them, deduplicated
across the whole sweep, into ``<sweep dir>/sweep_plan.json`` and prints the table.  A single run
writes ``sweep_plan.json`` in its run directory.  Per component: ``calls`` (distinct calls still to
make), ``cached`` (distinct calls the store holds and the run would reuse), ``loads`` (model loads
when the jobs run one after another in sweep order, as the basic launcher runs them: a job loads a
component when it meets a call no earlier job made), and estimates: API cost in USD (planners that
price their calls through ``Component.pricing`` and ``Component.estimate``, as the VLM planners of
:mod:`omnistory_core.kit.planning` do: prompt tokens counted on the real prompt, price from the
planner's ``prices`` or the reference table) and GPU-hours
(``calls`` x seconds per call from :data:`THROUGHPUT` or ``engine.plan.throughput``).

Each job's file also says what its job directory will hold (``candidates``: per example the
narration, image, speech and plan, known from the store, still to make, or missing), from which
the sweep callback plans the end-of-sweep evaluation (:mod:`omnistory_eval.plan`):
its rows (``metric/<name>``, ``judge/<id>``) join the table through :func:`add_components`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnistory_core.components import Component
from omnistory_core.contract import Failure, StoryExample
from omnistory_core.engine.devices import NO_GPU, gpus_needed
from omnistory_core.engine.failures import preflight, retry_mode
from omnistory_core.engine.hashing import MediaHasher
from omnistory_core.engine.job import job_walk
from omnistory_core.engine.stage import declaration_of, needs_recompute
from omnistory_core.engine.store import CallRecord, Store
from omnistory_core.engine.walk import (
    STAGE_MODALITY,
    Answers,
    JobWalk,
    Stage,
    Walked,
    drive,
    plan_record,
)

log = logging.getLogger("omnistory")

__all__ = [
    "JOB_FILE",
    "NO_GPU",
    "PLAN_FILE",
    "THROUGHPUT",
    "PlanSettings",
    "ReadOnlyStore",
    "merge_plans",
    "plan_job",
    "planned_calls",
    "render_plan",
]

#: per job: its keys (merged by the sweep callback)
JOB_FILE = "dry_run.json"
#: per sweep (or single run): the merged plan
PLAN_FILE = "sweep_plan.json"

#: Seconds of one GPU per call, per GPU type and component (``kind/name``).  Only measured values
#: belong here, each with its source; none has been measured on a GPU for this project yet, so the
#: table is empty and a GPU component's GPU-hours are unknown (``null``) until
#: ``engine.plan.throughput.<kind>.<name>=SECONDS`` gives them (for ``engine.plan.gpu``).
#: ``benchmarks/flux_throughput.py`` measures ``image/dev`` on a CUDA GPU.
THROUGHPUT: dict[str, dict[str, tuple[float, str]]] = {}

FOOTNOTES = (
    "calls: distinct calls still to make, deduplicated across the sweep and against the store;"
    " an expert's calls assume every upstream call still to make succeeds (a failed plan means"
    " fewer downstream calls).",
    "loads: model loads when the jobs run one after another in sweep order (one device);"
    " parallel jobs may each load a component they share, and each replica on engine.devices"
    " is one load.",
)


# -- the store, read only -------------------------------------------------------------------
class ReadOnlyStore(Store):
    """The store's records as :meth:`Store.get` reads them; creates, locks and writes nothing (a
    store directory that does not exist is an empty store)."""

    def __init__(self, root: str | Path):  # noqa: D107 - no mkdir, no locking mode
        self.root = Path(root)
        self.locking = "none"
        self.lease_s = 0.0

    def put(self, record: CallRecord) -> None:  # pragma: no cover - guard
        raise RuntimeError("a dry run writes nothing to the store")

    def put_blob(self, data: bytes, ext: str) -> str:  # pragma: no cover - guard
        raise RuntimeError("a dry run writes nothing to the store")

    def lock(self, key: str) -> Any:  # pragma: no cover - guard
        raise RuntimeError("a dry run locks nothing in the store")


# -- settings ---------------------------------------------------------------------------------
@dataclass
class PlanSettings:
    """``engine.plan``: the GPU type and count, throughput overrides, output-token assumption."""

    gpu: str = "H100"
    gpus: int = 1
    #: ``{kind: {name: seconds per call}}`` (overrides :data:`THROUGHPUT` for ``gpu``)
    throughput: dict[str, dict[str, float]] = field(default_factory=dict)
    #: assumed output tokens per planner call; None: the planner's ``max_tokens`` (upper bound)
    output_tokens: int | None = None

    @classmethod
    def from_config(cls, node: Mapping[str, Any] | None) -> PlanSettings:
        node = dict(node or {})
        unknown = sorted(set(node) - {"gpu", "gpus", "throughput", "output_tokens"})
        if unknown:
            raise ValueError(
                f"engine.plan: unknown key(s) {', '.join(unknown)}; known: gpu, gpus,"
                " throughput, output_tokens"
            )
        gpus = node.get("gpus", 1)
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise ValueError(f"engine.plan.gpus: expected an integer >= 1, got {gpus!r}")
        throughput: dict[str, dict[str, float]] = {}
        for kind, names in dict(node.get("throughput") or {}).items():
            if not isinstance(names, Mapping):
                raise ValueError(
                    f"engine.plan.throughput.{kind}: expected {{name: seconds per call}}, got"
                    f" {names!r}"
                )
            for name, seconds in names.items():
                if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
                    raise ValueError(
                        f"engine.plan.throughput.{kind}.{name}: expected seconds per call >= 0,"
                        f" got {seconds!r}"
                    )
                throughput.setdefault(str(kind), {})[str(name)] = float(seconds)
        output_tokens = node.get("output_tokens")
        if output_tokens is not None and (
            isinstance(output_tokens, bool)
            or not isinstance(output_tokens, int)
            or output_tokens < 0
        ):
            raise ValueError(
                "engine.plan.output_tokens: expected null or an integer >= 0, got"
                f" {output_tokens!r}"
            )
        return cls(str(node.get("gpu") or "H100"), gpus, throughput, output_tokens)

    def seconds_per_call(self, key: str, uses_gpu: bool | None = None) -> tuple[float | None, str]:
        """Seconds of one GPU per call of component ``key`` and where the number comes from
        (``uses_gpu``: the component class's ``uses_gpu`` attribute, if it declares one)."""
        if uses_gpu is False or (uses_gpu is None and key in NO_GPU):
            return 0.0, "uses no GPU"
        kind, _, name = key.partition("/")
        if name in self.throughput.get(kind, {}):
            return self.throughput[kind][name], f"engine.plan.throughput.{kind}.{name}"
        entry = THROUGHPUT.get(self.gpu, {}).get(key)
        if entry is not None:
            return entry
        return None, f"not measured on {self.gpu}: set engine.plan.throughput.{kind}.{name}"


# -- one job ----------------------------------------------------------------------------
def plan_job(
    *,
    examples: list[StoryExample] | None = None,
    components: dict[str, Component] | None = None,
    store: Store,
    retry_failures: bool | str = "errors",
    settings: PlanSettings | None = None,
    symbolic_experts: bool = False,
    media: MediaHasher | None = None,
    estimate: bool = True,
    walk: JobWalk | None = None,
) -> dict[str, Any]:
    """The keys one job would look up, per component in stage order: ``pending`` (no usable
    record: a call to make) and ``cached``; per pending planner call, its token and cost
    estimate; and ``candidates``, per example the outputs the evaluation will read from the job
    directory (``text``, ``image``, ``speech``, ``plan``): ``{"value": ...}`` (a narration or
    plan known from the store), ``{"blob": sha256, "ext": ...}`` (a stored image or speech),
    ``{"pending": name}`` (made by a call still to make, assumed to succeed: the call's key, or
    ``<key>#<position>`` for a member of a group call) or None (a missing output).

    The job is ``examples`` through ``components``, or ``walk``, its
    :func:`~omnistory_core.engine.job.job_walk` (shared with the run that follows: what this walk
    derives is not derived again).  ``symbolic_experts``: name every pending expert call by its
    upstream call and plan field (:meth:`~omnistory_core.engine.walk.Stage.names`), even where
    the plan is stored, so that jobs planning at different times name a shared call alike (the
    sweep's progress view).  ``media``: a :class:`MediaHasher` to share between jobs (each
    dataset file is hashed once).  ``estimate=False``: only the keys (no prompt is built, no token
    counted, no price looked up)."""
    if walk is None:
        assert examples is not None and components is not None, "examples and components, or walk"
        walk = job_walk(examples, components, media)
    mode = retry_mode(retry_failures)
    settings = settings or PlanSettings()
    out: dict[str, Any] = {}
    answered: list[tuple[Stage, Answers]] = []

    def answer(stage: Stage) -> Answers:
        entry, pricing = _component_entry(out, stage.component, settings, estimate)
        answers = _look_up(stage, store, mode, entry, pricing, settings, symbolic_experts)
        answered.append((stage, answers))
        return answers

    walked = drive(walk.stages(), answer)
    unavailable = [f"{c.kind}={c.name}: {exc}" for c, exc in preflight(walk.components.values())]
    return {
        "components": out,
        "cannot_run_here": unavailable,
        "candidates": _candidates(walk, answered, walked),
    }


def planned_calls(walk: JobWalk, store: Store, retry_failures: bool | str) -> dict[str, list[str]]:
    """The calls a job will make, per component, named as the sweep's progress view counts them:
    an expert's by its upstream call (:func:`plan_job` with ``symbolic_experts``), keys only."""
    plan = plan_job(
        walk=walk,
        store=store,
        retry_failures=retry_failures,
        symbolic_experts=True,
        estimate=False,  # the view counts calls; pricing every prompt would be wasted work
    )
    return {key: list(entry["pending"]) for key, entry in plan["components"].items()}


def _component_entry(
    out: dict[str, Any], component: Component, settings: PlanSettings, estimate: bool
) -> tuple[dict[str, Any], Any]:
    """The component's entry of the job's plan (created on its first stage), with how its calls
    are timed; and how they are priced (None: not estimated)."""
    pricing = component.pricing() if estimate else None
    entry = out.setdefault(
        component.key(), {"pending": [], "cached": [], "estimates": {}, "group": None}
    )
    seconds, seconds_source = settings.seconds_per_call(
        component.key(), getattr(component, "uses_gpu", None)
    )
    entry.update(
        seconds_per_call=seconds,
        seconds_source=seconds_source,
        price_source=pricing.source if pricing else None,
        gpus=gpus_needed(component) if seconds else 0,
    )
    return entry, pricing


def _look_up(
    stage: Stage,
    store: Store,
    mode: str,
    entry: dict[str, Any],
    pricing: Any,
    settings: PlanSettings,
    symbolic: bool,
) -> Answers:
    """Answer one stage from the store: per example its usable record, None for a call still to
    make (listed in ``entry``, with its estimate when priced), or the failure that blocks it."""
    component = stage.component
    declaration = declaration_of(component)
    names = stage.names() if symbolic and stage.is_expert else {}
    answers: dict[int, CallRecord | Failure | None] = {}
    seen: dict[str, CallRecord | None] = {}
    for unit in stage.units.items:
        if unit.blocked_by is not None:  # no call: a missing output
            answers[unit.index] = unit.blocked_by
            continue
        key = unit.key or ""
        if key not in seen:
            record = store.get(key)
            usable = record is not None and not needs_recompute(
                record, mode, stage.derived_failure, declaration
            )
            seen[key] = record if usable else None
            if usable:
                entry["cached"].append(key)
            else:
                entry["pending"].append(names.get(stage.unit_id(unit), key))
                if pricing is not None:
                    entry["estimates"][key] = component.estimate(
                        unit.inputs or {}, pricing, settings.output_tokens
                    )
        answers[unit.index] = seen[key]
    entry["group"] = stage.group
    return stage.units.split(answers)


def _candidates(
    walk: JobWalk, answered: list[tuple[Stage, Answers]], walked: Walked
) -> list[dict[str, Any]]:
    """Per example, what its job directory will hold (see :func:`plan_job`)."""
    (source, first), experts = answered[0], answered[1:]
    candidates: dict[int, dict[str, Any]] = {ex.index: {"index": ex.index} for ex in walk.examples}
    native: frozenset[str] = frozenset()
    if source.group == "backbone":
        native = getattr(source.component, "produces", frozenset())
    for ex in walk.examples:
        outputs = candidates[ex.index]
        if first[ex.index] is None:  # still to compute: assume it succeeds
            name = source.outputs[ex.index]
            for modality in ("text", "plan", *sorted(m for m in native if m != "text")):
                outputs[modality] = {"pending": name}
            continue
        for modality in ("image", "speech"):
            if modality in native:
                outputs[modality] = _stored_media(walked.media[modality][ex.index])
        value = walked.text[ex.index]
        outputs["text"] = {"value": value} if isinstance(value, str) else None
        plan = plan_record(walked.plans[ex.index])
        outputs["plan"] = {"value": plan} if plan is not None else None
    for stage, answers in experts:
        modality = STAGE_MODALITY[stage.group]
        for ex in walk.examples:
            candidates[ex.index][modality] = _expert_candidate(stage, ex.index, answers[ex.index])
    return [candidates[ex.index] for ex in walk.examples]


def _expert_candidate(
    stage: Stage, index: int, answer: CallRecord | Failure | None
) -> dict[str, Any] | None:
    if isinstance(answer, Failure):  # blocked by its plan: a missing output
        return None
    if answer is None:
        return {"pending": stage.outputs[index]}
    return _stored_media(answer)


def _stored_media(value: CallRecord | Failure | None) -> dict[str, Any] | None:
    """A stored image or speech output as the job directory will hold it (its blob), or None
    when the output will be missing (a failed call or modality)."""
    if not isinstance(value, CallRecord) or value.status != "ok" or not value.output.get("blob"):
        return None
    return {"blob": str(value.output["blob"]), "ext": str(value.output.get("ext", ""))}


# -- the sweep -----------------------------------------------------------------------------
def merge_plans(jobs: list[dict[str, Any]], settings: PlanSettings | None = None) -> dict[str, Any]:
    """The sweep's plan from its jobs' (each with ``job``, its number in the sweep, and
    ``system_id``): distinct keys per component, loads in sweep order, estimates, totals."""
    settings = settings or PlanSettings()
    pending: dict[str, set[str]] = {}
    cached: dict[str, set[str]] = {}
    loads: dict[str, int] = {}
    estimates: dict[str, dict[str, dict[str, Any]]] = {}
    info: dict[str, dict[str, Any]] = {}
    cannot_run: dict[str, list[str]] = {}  # problem -> systems it stops
    for job in sorted(jobs, key=lambda j: (j.get("job", 0), j.get("system_id", ""))):
        for problem in job.get("cannot_run_here", []):
            cannot_run.setdefault(problem, []).append(str(job.get("system_id")))
        for key, entry in job["components"].items():
            mine = set(entry["pending"])
            claimed = pending.setdefault(key, set())
            loads.setdefault(key, 0)
            if mine - claimed:
                loads[key] += 1
            claimed |= mine
            cached.setdefault(key, set()).update(entry["cached"])
            estimates.setdefault(key, {}).update(entry.get("estimates") or {})
            info.setdefault(key, entry)
    components: dict[str, dict[str, Any]] = {}
    for key in sorted(pending):
        per_key = [estimates[key][k] for k in pending[key] if k in estimates[key]]
        components[key] = component_row(
            len(pending[key]), len(cached[key] - pending[key]), loads[key], info[key], per_key
        )
    total = plan_totals(components, settings)
    notes: list[str] = list(FOOTNOTES)
    if any("price_source" in r for r in components.values()):
        notes.append(
            "est_cost_usd: input tokens counted on the prompts the planner would send (text:"
            f" {'tiktoken o200k_base' if _has_tiktoken() else 'characters / 4'}; image: width x"
            " height / 750, Anthropic's published estimate, an assumption for other APIs);"
            " output tokens: "
            + (
                f"engine.plan.output_tokens={settings.output_tokens} (assumed)"
                if settings.output_tokens is not None
                else "the planner's max_tokens, an upper bound"
            )
            + "."
        )
    notes.append(
        f"est_wall_hours: GPU-hours / engine.plan.gpus={settings.gpus} ({settings.gpu}), ideal"
        " packing; model loads and API latency are not included."
    )
    return {
        "components": components,
        "total": total,
        "jobs": len(jobs),
        "devices": {"gpu": settings.gpu, "gpus": settings.gpus},
        "cannot_run_here": [{"problem": p, "systems": v} for p, v in cannot_run.items()],
        "notes": notes,
    }


def component_row(
    calls: int, cached: int, loads: int, entry: Mapping[str, Any], per_key: list[dict[str, Any]]
) -> dict[str, Any]:
    """One row of ``components``: counts and estimates.  ``entry``: ``price_source`` (None: no
    paid API, cost 0), ``seconds_per_call`` and ``seconds_source``, optionally ``cost_note`` (why a
    priced component has no cost estimate); ``per_key``: the estimates of the calls to make."""
    row: dict[str, Any] = {
        "calls": calls,
        "cached": cached,
        "loads": loads,
        "est_cost_usd": None,
        "est_gpu_hours": None,
    }
    if entry.get("price_source") is None:
        row["est_cost_usd"] = 0.0  # no hosted API: no per-call price
    else:
        if len(per_key) == calls:
            if all(e.get("input_tokens") is not None for e in per_key):
                row["est_input_tokens"] = sum(int(e["input_tokens"]) for e in per_key)
            row["est_output_tokens"] = sum(int(e["output_tokens"]) for e in per_key)
            if all("cost_usd" in e for e in per_key):
                row["est_cost_usd"] = round(sum(float(e["cost_usd"]) for e in per_key), 6)
        row["price_source"] = entry["price_source"]
        if row["est_cost_usd"] is None and entry.get("cost_note"):
            row["cost_note"] = entry["cost_note"]
    seconds = entry.get("seconds_per_call")
    if seconds is not None:
        # a call of a model on several GPUs (tensor parallel) holds them all that long
        gpus = max(1, int(entry.get("gpus") or 1))
        row["est_gpu_hours"] = round(calls * float(seconds) * gpus / 3600, 6)
    elif calls == 0:
        row["est_gpu_hours"] = 0.0
    row["throughput_source"] = entry.get("seconds_source")
    return row


def plan_totals(components: Mapping[str, Mapping[str, Any]], settings: PlanSettings) -> dict:
    """The ``total`` of a plan: sums of the rows and known estimates, and the rows without one."""
    cost = [r["est_cost_usd"] for r in components.values()]
    hours = [r["est_gpu_hours"] for r in components.values()]
    total_hours = round(float(sum(h for h in hours if h is not None)), 6)
    return {
        "calls": sum(r["calls"] for r in components.values()),
        "cached": sum(r["cached"] for r in components.values()),
        "loads": sum(r["loads"] for r in components.values()),
        "est_cost_usd": round(float(sum(c for c in cost if c is not None)), 6),
        "est_gpu_hours": total_hours,
        "est_wall_hours": round(total_hours / settings.gpus, 6),
        # components whose estimate is unknown: the totals above leave them out
        "unpriced": sorted(k for k, r in components.items() if r["est_cost_usd"] is None),
        "gpu_hours_unknown": sorted(k for k, r in components.items() if r["est_gpu_hours"] is None),
    }


def add_components(
    plan: dict[str, Any], rows: Mapping[str, dict[str, Any]], settings: PlanSettings
) -> None:
    """Add rows (the evaluators', after the generation's) to a merged plan and redo its totals."""
    plan["components"].update(rows)
    plan["total"] = plan_totals(plan["components"], settings)


def _has_tiktoken() -> bool:
    import importlib.util

    return importlib.util.find_spec("tiktoken") is not None


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "?"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def render_plan(plan: Mapping[str, Any], title: str = "dry run") -> str:
    """The plan as a rich table (returned as text, also what the console shows)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{title}: {plan['jobs']} job(s), nothing called", show_footer=True)
    total = plan["total"]
    columns = (
        ("component", "total", "left"),
        ("calls", _fmt(total["calls"]), "right"),
        ("cached", _fmt(total["cached"]), "right"),
        ("loads", _fmt(total["loads"]), "right"),
        ("est. USD", _fmt(total["est_cost_usd"]) + (" + ?" if total["unpriced"] else ""), "right"),
        (
            "est. GPU-h",
            _fmt(total["est_gpu_hours"], 3) + (" + ?" if total["gpu_hours_unknown"] else ""),
            "right",
        ),
    )
    for name, footer, justify in columns:
        table.add_column(name, footer=footer, justify=justify)  # type: ignore[arg-type]
    section = False
    for key, row in plan["components"].items():
        if row.get("stage") == "evaluation" and not section:
            table.add_section()  # the evaluators, after the generation's components
            section = True
        table.add_row(
            key,
            _fmt(row["calls"]),
            _fmt(row["cached"]),
            _fmt(row["loads"]),
            _fmt(row["est_cost_usd"]),
            _fmt(row["est_gpu_hours"], 3),
        )
    import io

    buffer = io.StringIO()
    console = Console(file=buffer, width=110, force_terminal=False, color_system=None)
    if True:
        console.print(table)
        console.print(
            f"wall time on {plan['devices']['gpus']} x {plan['devices']['gpu']}:"
            f" {_fmt(total['est_wall_hours'], 3)} h (GPU components with a known throughput)"
        )
        rows = plan["components"]
        unpriced = [k for k in total["unpriced"] if not rows.get(k, {}).get("cost_note")]
        if unpriced:
            console.print(f"? no price: {', '.join(unpriced)} (not in the USD total)")
        for key in total["unpriced"]:
            if rows.get(key, {}).get("cost_note"):
                console.print(f"? no cost estimate: {key}: {rows[key]['cost_note']}", markup=False)
        if total["gpu_hours_unknown"]:
            console.print(
                f"? no throughput: {', '.join(total['gpu_hours_unknown'])} (not in the GPU-h"
                " total; engine.plan.throughput.<kind>.<name>=SECONDS_PER_CALL)"
            )
        for entry in plan.get("cannot_run_here", []):
            systems = entry["systems"]
            console.print(
                f"! cannot run here ({len(systems)} system(s): {', '.join(systems)}):"
                f" {entry['problem']}",
                markup=False,
            )
        for problem in plan.get("evaluation_cannot_run_here", []):
            console.print(f"! evaluation cannot run here: {problem}", markup=False)
        for note in plan["notes"]:
            console.print(f"* {note}", markup=False)
    return buffer.getvalue()


def write_plan(directory: Path, plan: Mapping[str, Any]) -> Path:
    from omnistory_core.engine.store import atomic_write_bytes

    path = directory / PLAN_FILE
    atomic_write_bytes(path, (json.dumps(plan, indent=2) + "\n").encode("utf-8"))
    return path


def read_job_plans(sweep_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text("utf-8")) for p in sorted(sweep_dir.glob(f"*/{JOB_FILE}"))]


def clear_job_plans(sweep_dir: Path) -> None:
    """Before a sweep's dry run: earlier jobs' files are not this sweep's."""
    for path in sweep_dir.glob(f"*/{JOB_FILE}"):
        path.unlink(missing_ok=True)
