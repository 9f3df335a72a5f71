"""The Hydra entry point: ``python -m omnistory_core [overrides]`` runs :func:`task` once per job.

Only what ties omnistory to Hydra lives here: the command line as Hydra gets it (a component's
parameters forced, so the component checks them per job: :func:`prepare_overrides`), the task (one
system per job, a configuration error as one clear line, recorded per job in a sweep; a parameter
for a group the job does not build and a config of a plugin that failed to load are such errors),
the sections of ``--help`` Hydra cannot fill, and the hint that names failed plugins when Hydra
cannot find a config.  The work itself is elsewhere:

* :mod:`omnistory_core.run.generate`: one system over the dataset -> its job directory;
* :mod:`omnistory_core.run.manifest`: the job's ``manifest.json``;
* :mod:`omnistory_core.run.sweep`: the sweep callback (``conf/config.yaml``) and the end-of-sweep
  evaluation and report;
* :mod:`omnistory_core.data.cache`: the dataset, loaded once per process;
* :mod:`omnistory_core.engine.progress`: progress bars.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from omnistory_core.errors import ConfigError, PluginError, UserError
from omnistory_core.params import ParamOverride, force_param_overrides, parse_param_override
from omnistory_core.redaction import redact
from omnistory_core.run.generate import run_system
from omnistory_core.tasks import selected_task


def component_groups() -> tuple[str, ...]:
    """Every component kind (planner, image, tts, backbone, metric, judge): the config groups
    whose keys are component parameters."""
    from omnistory_core.plugins import COMPONENT_HOOKS

    return tuple(COMPONENT_HOOKS.values())


def prepare_overrides(args: Sequence[str]) -> list[str]:
    """The command line as Hydra gets it: parameters of component groups forced (``++``), so a
    mistyped one is refused by the component, per job, in one line
    (:func:`omnistory_core.params.force_param_overrides`)."""
    register_help_resolver()
    return force_param_overrides(args, component_groups())


#: groups ``--help`` always lists, with "none installed" when no option exists
HELP_GROUPS = ("task", "planner", "backbone", "image", "tts", "metric", "judge")


def register_help_resolver() -> None:
    """``${omnistory_help:groups}`` and ``${omnistory_help:commands}`` in ``hydra.help`` (see
    ``conf/config.yaml``): what Hydra's help cannot know by itself."""
    if not OmegaConf.has_resolver("omnistory_help"):
        OmegaConf.register_new_resolver("omnistory_help", help_text)


def help_text(what: str) -> str:
    """``groups``: a line ``kind: none installed`` for each of :data:`HELP_GROUPS` that has no
    option (Hydra lists only groups with options: no metric or judge without the evaluation
    distribution); ``commands``: the subcommands installed."""
    from omnistory_core.plugins import load_plugins

    registry = load_plugins()
    if what == "commands":
        return ", ".join(sorted(registry.commands)) or "none"
    if what != "groups":
        raise ValueError(f"omnistory_help: unknown section {what!r}")
    lines = []
    for group in HELP_GROUPS:
        if not _group_options(group, registry):
            lines.append(f"{group}: none installed (python -m omnistory_core plugins)")
    # Hydra's list ends with a newline: these lines follow it directly
    return "".join(f"{line}\n" for line in lines)


def _group_options(group: str, registry: Any) -> list[str]:
    """The options Hydra lists for ``group`` (what the help is rendering from); the registered
    names when Hydra is not running."""
    try:
        from hydra.core.global_hydra import GlobalHydra

        loader = GlobalHydra.instance().config_loader()
        return list(loader.get_group_options(group))
    except Exception:  # noqa: BLE001 - outside a Hydra app: the registry is the next best
        return registry.names(group) or list(registry.tasks if group == "task" else [])


def output_dir_of_current_job() -> Path:
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


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


def job_param_overrides() -> list[ParamOverride]:
    """The parameter overrides of this Hydra job (its command line and its sweep values)."""
    from hydra.core.hydra_config import HydraConfig

    overrides = [str(o) for o in HydraConfig.get().overrides.task]
    groups = component_groups()
    found = (parse_param_override(o, groups) for o in overrides)
    return [o for o in found if o is not None and o.is_parameter]


def used_groups(cfg: DictConfig, task_generates: bool) -> tuple[dict[str, str], str]:
    """The component groups this job builds (group -> component name) and how to name the
    system in a message.

    The core's generation resolves the system exactly as :func:`run.generate.prepare_system`
    does (a default planner steps aside for a backbone, ...); a task with its own generation
    builds what it chooses, so every group that names a component counts as used there, except
    a default (``default_choice``) the command line did not name."""
    from omnistory_core.engine.system import chosen, job_config, resolve_system
    from omnistory_core.plugins import load_plugins
    from omnistory_core.run.generate import named_on_command_line

    plain = job_config(cfg)
    for group in named_on_command_line():
        if isinstance(plain.get(group), dict):
            plain[group].pop("default_choice", None)
    if task_generates:
        # the story-continuation defaults (default_choice) step aside for a task's own job
        names = {
            g: str(plain[g]["name"])
            for g in component_groups()
            if chosen(plain.get(g)) and not plain[g].get("default_choice")
        }
        return names, " + ".join(f"{g}={n}" for g, n in names.items()) or "of this run"
    system = resolve_system(plain, load_plugins())
    names = {g: str(node["name"]) for g, node in system.specs.items()}
    return names, " + ".join(f"{g}={n}" for g, n in names.items())


def check_param_overrides(cfg: DictConfig, task_generates: bool) -> None:
    """Refuse a parameter for a group the job does not build (``backbone.top_k=4`` without a
    backbone, ``planner.max_tokens=9`` with a backbone): it would be dropped silently.  The keys
    of a group that is built are checked by the component itself when it is built."""
    overrides = job_param_overrides()
    for override in overrides:
        if override.group in ("metric", "judge"):  # evaluators are never part of a system
            raise ConfigError(
                f"{override.text}: a generation run builds no {override.group}; an evaluator's"
                f" parameter is set with 'evaluation.overrides=[\"{override.text}\"]' (scored"
                f" at the end of a -m sweep) or `python -m omnistory_core evaluate --set"
                f" {override.text}`"
            )
    if not overrides:
        return
    used, system = used_groups(cfg, task_generates)
    for override in overrides:
        if override.group in used:
            continue
        fix = (
            f"remove it (backbone={used['backbone']} makes what a {override.group} would)"
            if "backbone" in used
            else f"remove it or choose {override.group}=NAME"
        )
        raise ConfigError(
            f"{override.text}: the system {system} has no {override.group}, so nothing would"
            f" read it; {fix}"
        )


def check_available(cfg: DictConfig) -> None:
    """A config of a plugin that failed to load (see :mod:`omnistory_core.unavailable`): one
    line naming the plugin and why, for this job only."""
    from omnistory_core.unavailable import MARKER

    node = cfg.get(MARKER)
    if node:
        plain = OmegaConf.to_container(node, resolve=False)
        raise PluginError("; ".join(str(v) for v in dict(plain).values()))  # type: ignore[arg-type]


def check_dataset_task(cfg: DictConfig, task_name: str) -> None:
    """Refuse a dataset that another installed task declares (``dataset=vistory_fixture`` under
    the default task): one line naming both tasks, before any model is built."""
    from omnistory_core.tasks import dataset_task

    name = str((cfg.get("dataset") or {}).get("name"))
    owner = dataset_task(name)
    if owner is not None and owner != task_name:
        raise ConfigError(
            f"dataset={name} is a dataset of task {owner}, but this run's task is {task_name};"
            f" add task={owner} (or choose a dataset of task {task_name})"
        )


#: what Hydra writes into a job directory before the task runs (its config and the job's log)
HYDRA_BOOKKEEPING = ".hydra"


def discard_if_untouched(output_dir: Path, stop_at: Path) -> None:
    """Remove a single run's job directory that holds nothing but what Hydra wrote before the
    task ran (``.hydra/`` and the log), and the folders above it that this left empty (up to
    ``stop_at``): a run refused before it started leaves nothing behind."""
    import shutil

    if not output_dir.is_dir():
        return
    for entry in output_dir.iterdir():
        if entry.name != HYDRA_BOOKKEEPING and not (entry.is_file() and entry.suffix == ".log"):
            return
    shutil.rmtree(output_dir, ignore_errors=True)
    stop = stop_at.resolve()
    parent = output_dir.resolve().parent
    while parent != stop and stop in parent.parents:
        try:
            parent.rmdir()  # only an empty folder
        except OSError:
            break
        parent = parent.parent


def task(cfg: DictConfig) -> None:
    """Hydra task: one system.  A configuration error is one clear line, not a traceback; in a
    sweep it is recorded in the job directory (``job_error.json``) and the other jobs go on; a
    single run refused before it started leaves no job directory behind."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from omnistory_core.engine.store import atomic_write_bytes

    output_dir = output_dir_of_current_job()
    error_file = output_dir / "job_error.json"
    if error_file.exists():
        error_file.unlink()
    try:
        check_available(cfg)
        task_of_job = selected_task(cfg)
        check_dataset_task(cfg, task_of_job.name)
        check_param_overrides(cfg, task_of_job.generate is not None)
        (task_of_job.generate or run_system)(cfg, output_dir)
    except UserError as exc:
        print(f"omnistory: error: {cfg.system_id}: {exc}", file=sys.stderr)
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            discard_if_untouched(output_dir, Path(str(cfg.get("output_root") or ".")))
            raise SystemExit(2) from None
        record = {"system_id": str(cfg.system_id), "error": f"{type(exc).__name__}: {exc}"}
        atomic_write_bytes(error_file, (json.dumps(redact(record), indent=2) + "\n").encode())


os.environ.setdefault("HYDRA_FULL_ERROR", "0")
