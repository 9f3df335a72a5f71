"""The engine's building blocks for a task plugin that runs its own jobs (``Task.generate``).

A task whose records or outputs are not the story-continuation contract (ViStoryBench: shots ->
one image each) writes its job from these: build the components a config names, hash the dataset's
files once, run each stage through the content-addressed store (locks, replicas, isolation,
retries of failures as configured), report progress, and write the manifest.  This module is
their public surface (its ``__all__``); the engine modules behind it are internal.  A task's dry
run (``engine.dry_run=true``) plans its stages with the same pieces: the calls of a stage
(``call_units``), whether a stored record is reused (``needs_recompute``, ``declaration_of``),
the read-only store, and the plan files and table of :mod:`omnistory_core.engine.dryrun`.
"""

from __future__ import annotations

from omnistory_core.engine.devices import DeviceError
from omnistory_core.engine.dryrun import (
    JOB_FILE,
    PLAN_FILE,
    PlanSettings,
    ReadOnlyStore,
    merge_plans,
    render_plan,
    write_plan,
)
from omnistory_core.engine.failures import (
    ComponentUnavailable,
    check_missing,
    preflight,
    retry_mode,
    unavailable_message,
)
from omnistory_core.engine.hashing import MediaHasher
from omnistory_core.engine.isolation import maybe_isolate
from omnistory_core.engine.job import build_component
from omnistory_core.engine.progress import progress_bars
from omnistory_core.engine.replicas import stage_devices
from omnistory_core.engine.stage import (
    CacheMiss,
    ComponentStats,
    LazyComponent,
    StageItem,
    call_units,
    declaration_of,
    item_key,
    needs_recompute,
    run_stage,
)
from omnistory_core.engine.store import CallRecord, Store, atomic_write_bytes
from omnistory_core.engine.system import chosen, explicit
from omnistory_core.params import describe as describe_param
from omnistory_core.params import parse_param_override
from omnistory_core.plugins import load_plugins
from omnistory_core.redaction import install_log_filter, redact
from omnistory_core.run.generate import named_on_command_line
from omnistory_core.run.manifest import (
    component_manifest,
    environment_manifest,
    git_revision,
    write_manifest,
)

__all__ = [
    "CacheMiss",
    "CallRecord",
    "ComponentStats",
    "ComponentUnavailable",
    "DeviceError",
    "JOB_FILE",
    "LazyComponent",
    "MediaHasher",
    "PLAN_FILE",
    "PlanSettings",
    "ReadOnlyStore",
    "StageItem",
    "Store",
    "atomic_write_bytes",
    "build_component",
    "call_units",
    "check_missing",
    "chosen",
    "component_manifest",
    "declaration_of",
    "describe_param",
    "environment_manifest",
    "explicit",
    "git_revision",
    "install_log_filter",
    "item_key",
    "load_plugins",
    "maybe_isolate",
    "merge_plans",
    "named_on_command_line",
    "needs_recompute",
    "parse_param_override",
    "preflight",
    "progress_bars",
    "redact",
    "render_plan",
    "retry_mode",
    "run_stage",
    "stage_devices",
    "unavailable_message",
    "write_manifest",
    "write_plan",
]
