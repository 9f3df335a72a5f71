"""Plugin loading (pluggy, entry-point group ``omnistory``) and the component registry.

Every entry point is loaded inside its own try/except: a broken plugin costs one warning line naming
its distribution and version, never the CLI.  That includes a plugin whose hooks do not match the
specs (a misspelled hook name, a wrong argument): it is checked on its own when it registers, not by
one ``check_pending`` over all plugins.  The configs a failed plugin would have provided compose
as stand-ins that fail only the jobs using them (:mod:`omnistory_core.unavailable`).  Switches
(environment variables):

* ``OMNISTORY_STRICT_PLUGINS=1``: re-raise plugin errors (for plugin authors);
* ``OMNISTORY_BLOCK_PLUGINS=a,b``: skip these entry-point or distribution names;
* ``OMNISTORY_DISABLE_PLUGIN_AUTOLOAD=1``: load only the built-in plugin.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata as md
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from omnistory_core import hookspecs
from omnistory_core.components import Component, check_produces
from omnistory_core.errors import ConfigError, PluginError
from omnistory_core.seams import (
    EVAL_DISTRIBUTION,
    Command,
    EvaluationService,
    missing_distribution,
)

ENTRY_POINT_GROUP = "omnistory"
BUILTIN_PLUGIN = "omnistory_core.builtin"

#: hook name -> component kind it registers
#: hooks the core calls with arguments of their own (not ``register``)
EVENT_HOOKS = frozenset({"sweep_finished"})

COMPONENT_HOOKS: dict[str, str] = {
    "register_planners": "planner",
    "register_image_experts": "image",
    "register_tts_experts": "tts",
    "register_backbones": "backbone",
    "register_metrics": "metric",
    "register_judges": "judge",
}


@dataclass
class PluginInfo:
    name: str
    distribution: str
    version: str
    registers: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None


@dataclass
class Registry:
    components: dict[tuple[str, str], type[Component]] = field(default_factory=dict)
    origins: dict[tuple[str, str], str] = field(default_factory=dict)
    datasets: dict[str, Callable[..., Any]] = field(default_factory=dict)
    config_paths: list[str] = field(default_factory=list)
    tasks: dict[str, Any] = field(default_factory=dict)
    commands: dict[str, Command] = field(default_factory=dict)
    evaluation: EvaluationService | None = None
    plugins: dict[str, PluginInfo] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    manager: pluggy.PluginManager | None = None

    def sweep_finished(self, sweep_dir: Any, config: Any) -> int:
        """Call every plugin's ``sweep_finished`` hook; the worst exit status they return."""
        if self.manager is None:
            return 0
        results = self.manager.hook.sweep_finished(sweep_dir=sweep_dir, config=config)
        return max([int(r) for r in results if r is not None], default=0)

    def has_sweep_finished(self) -> bool:
        return self.manager is not None and bool(self.manager.hook.sweep_finished.get_hookimpls())

    def evaluation_service(self) -> EvaluationService:
        """The registered evaluation (``omnistory-eval``); a :class:`ConfigError` naming the
        distribution to install when there is none."""
        if self.evaluation is None:
            raise ConfigError(
                missing_distribution(
                    "evaluation.metrics / evaluation.judges", EVAL_DISTRIBUTION, "those settings"
                )
            )
        return self.evaluation

    def task(self, name: str) -> Any:
        try:
            return self.tasks[name]
        except KeyError:
            raise PluginError(
                f"no task named {name!r} is registered; known tasks: "
                f"{', '.join(sorted(self.tasks)) or 'none'}"
                " (run `python -m omnistory_core tasks` to list them)"
            ) from None

    def component(self, kind: str, name: str) -> type[Component]:
        try:
            return self.components[(kind, name)]
        except KeyError:
            known = sorted(n for k, n in self.components if k == kind)
            failed = self.failed()
            raise PluginError(
                f"no {kind} named {name!r} is registered; "
                f"known {kind}s: {', '.join(known) or 'none'}"
                + (f"; plugins that failed to load: {_describe(failed)}" if failed else "")
                + " (run `python -m omnistory_core plugins` to see plugins and load errors)"
            ) from None

    def names(self, kind: str) -> list[str]:
        return sorted(n for k, n in self.components if k == kind)

    def failed(self) -> list[PluginInfo]:
        """Plugins that did not load (broken or blocked), by name."""
        return [info for _, info in sorted(self.plugins.items()) if info.error]


def _describe(infos: list[PluginInfo]) -> str:
    return ", ".join(f"{i.name!r} ({i.distribution} {i.version})" for i in infos)


def _shipped_config(info: PluginInfo, config: str) -> bool:
    """Whether the plugin's distribution contains ``<...>/<config>.yaml`` (e.g. ``system/x``)."""
    try:
        files = md.distribution(info.distribution).files or []
    except (md.PackageNotFoundError, ValueError):
        return False
    suffix = f"/{config.strip('/')}.yaml"
    return any(f"/{file.as_posix()}".endswith(suffix) for file in files)


_MISSING_CONFIG = re.compile(
    r"Could not (?:find|load) '([^']+)'"
    r"|Could not override '([^']+)'\. No match in the defaults list"
)


def missing_config_hint(message: str, registry: Registry | None = None) -> str | None:
    """For Hydra's "Could not find 'system/x'" (or "Could not load", or a group override with no
    match in the defaults list): the plugins that failed to load, which may own that config, and
    how to see why.  ``None`` when the message is about something else or every plugin loaded."""
    match = _MISSING_CONFIG.search(message)
    if match is None:
        return None
    return config_owner_hint(match.group(1) or match.group(2), registry or load_plugins())


def config_owner_hint(config: str, registry: Registry, *, guess: bool = True) -> str | None:
    """Why ``config`` (``system/x``) is missing, when a plugin that failed to load may own it:
    the plugin whose distribution ships it and its error, else (``guess``) every failed plugin.
    ``None`` when every plugin loaded, or none ships it and ``guess`` is false."""
    failed = registry.failed()
    if not failed:
        return None
    see = "run `python -m omnistory_core plugins` to see why"
    owners = [info for info in failed if _shipped_config(info, config)]
    if owners:
        owner = owners[0]
        return (
            f"'{config}' is shipped by plugin {owner.name!r} ({owner.distribution} "
            f"{owner.version}), which failed to load: {_one_line(owner.error or '', 200)}; {see}"
        )
    if not guess:
        return None
    return f"plugins that failed to load, which may provide '{config}': {_describe(failed)}; {see}"


def _one_line(text: str, width: int | None = None) -> str:
    """Collapse a multi-line error (pluggy's validation errors span lines) for a warning line."""
    flat = "; ".join(part.strip() for part in text.splitlines() if part.strip())
    if width is not None and len(flat) > width:
        flat = flat[: width - 3] + "..."
    return flat


_lock = threading.Lock()
_registry: Registry | None = None


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _warn(registry: Registry, message: str) -> None:
    registry.warnings.append(message)
    print(f"[omnistory] WARNING: {message}", file=sys.stderr)


def _dist_of(module_name: str) -> tuple[str, str]:
    top = module_name.split(".")[0]
    for dist_name in md.packages_distributions().get(top, []):
        try:
            return dist_name, md.version(dist_name)
        except md.PackageNotFoundError:
            continue
    return "unknown", "unknown"


def _make_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager("omnistory")
    pm.add_hookspecs(hookspecs)
    return pm


def _check_hooks(pm: pluggy.PluginManager, plugin_name: str) -> None:
    """Refuse a plugin whose hooks do not match the specs, naming the hook and the fix.

    pluggy checks argument names at ``register`` but leaves unknown hook names to
    ``check_pending``, which covers all plugins at once: one misspelling there would stop every
    plugin, so the same check is done here for one plugin.
    """
    plugin = pm.get_plugin(plugin_name)
    known = sorted(name for name in vars(hookspecs) if name.startswith("register_"))
    known += sorted(EVENT_HOOKS)
    for caller in pm.get_hookcallers(plugin) or []:
        for impl in caller.get_hookimpls():
            if impl.plugin_name != plugin_name:
                continue
            if not caller.has_spec():
                if impl.optionalhook:
                    continue
                close = difflib.get_close_matches(caller.name, known, n=1)
                hint = f"did you mean {close[0]!r}?" if close else "known: " + ", ".join(known)
                raise pluggy.PluginValidationError(plugin, f"unknown hook {caller.name!r} ({hint})")
            if impl.hookwrapper or impl.wrapper:
                raise pluggy.PluginValidationError(
                    plugin, f"hook {caller.name!r} must be a plain @hookimpl, not a wrapper"
                )
            if caller.name in EVENT_HOOKS:
                continue  # pluggy checked its argument names against the spec
            if "register" not in impl.argnames:
                raise pluggy.PluginValidationError(
                    plugin,
                    f"hook {caller.name!r} must take the argument 'register' "
                    f"(def {caller.name}(register): ...)",
                )


def _collect(pm: pluggy.PluginManager, registry: Registry, plugin_name: str) -> None:
    """Call every register_* hook of one plugin, recording what it registers."""
    plugin = pm.get_plugin(plugin_name)
    info = registry.plugins[plugin_name]
    for impl in pm.get_hookcallers(plugin) or []:
        hook_name = impl.name
        for hook_impl in impl.get_hookimpls():
            if hook_impl.plugin_name != plugin_name:
                continue
            registered: list[tuple[str, str]] = []
            if hook_name in COMPONENT_HOOKS:
                kind = COMPONENT_HOOKS[hook_name]

                def register_component(
                    cls: type[Component], _kind: str = kind, _acc=registered
                ) -> None:
                    if not (isinstance(cls, type) and issubclass(cls, Component)):
                        raise PluginError(f"{cls!r} is not a Component subclass")
                    if getattr(cls, "kind", None) != _kind:
                        raise PluginError(
                            f"{cls.__name__} has kind {getattr(cls, 'kind', None)!r},"
                            f" cannot register it as {_kind}"
                        )
                    if _kind == "backbone":
                        try:
                            check_produces(cls)
                        except ConfigError as exc:
                            raise PluginError(str(exc)) from None
                    key = (_kind, cls.name)
                    if key in registry.components and registry.components[key] is not cls:
                        _warn(
                            registry,
                            f"{_kind} {cls.name!r} from plugin {plugin_name!r} ignored: already"
                            f" registered by {registry.origins[key]!r}",
                        )
                        return
                    registry.components[key] = cls
                    registry.origins[key] = plugin_name
                    _acc.append((_kind, cls.name))

                register: Callable[..., None] = register_component
            elif hook_name == "register_datasets":

                def register_dataset(
                    name: str, loader: Callable[..., Any], _acc=registered
                ) -> None:
                    registry.datasets.setdefault(name, loader)
                    _acc.append(("dataset", name))

                register = register_dataset

            elif hook_name == "register_config_paths":

                def register_config_path(path: str, _acc=registered) -> None:
                    if path not in registry.config_paths:
                        registry.config_paths.append(path)
                    _acc.append(("config", path))

                register = register_config_path

            elif hook_name == "register_tasks":

                def register_task(task: Any, _acc=registered) -> None:
                    name = str(getattr(task, "name", "") or "")
                    if not name:
                        raise PluginError(f"{task!r} is not a task (it has no name)")
                    registry.tasks.setdefault(name, task)
                    _acc.append(("task", name))

                register = register_task
            elif hook_name == "register_commands":

                def register_command(
                    name: str, main: Callable[[list[str]], int], help: str = "", _acc=registered
                ) -> None:
                    registry.commands.setdefault(
                        name, Command(name, main, help, plugin=plugin_name)
                    )
                    _acc.append(("command", name))

                register = register_command
            elif hook_name == "register_evaluation":

                def register_evaluation(service: EvaluationService, _acc=registered) -> None:
                    if registry.evaluation is None:
                        registry.evaluation = service
                    _acc.append(("evaluation", type(service).__name__))

                register = register_evaluation
            elif hook_name in EVENT_HOOKS:
                continue
            else:  # pragma: no cover - _check_hooks refused unknown hooks before this
                continue
            hook_impl.function(register=register)
            for kind, entry in registered:
                info.registers.setdefault(kind, []).append(entry)


def _register_plugin(
    pm: pluggy.PluginManager,
    registry: Registry,
    name: str,
    load: Callable[[], Any],
    dist: str,
    version: str,
    strict: bool,
) -> None:
    registry.plugins[name] = info = PluginInfo(name=name, distribution=dist, version=version)
    snapshot = (
        dict(registry.components),
        dict(registry.origins),
        dict(registry.datasets),
        list(registry.config_paths),
        dict(registry.tasks),
        dict(registry.commands),
        registry.evaluation,
    )
    try:
        module = load()
        pm.register(module, name=name)
        _check_hooks(pm, name)
        _collect(pm, registry, name)
    except Exception as exc:
        # Roll back whatever the plugin managed to register before failing.
        (
            registry.components,
            registry.origins,
            registry.datasets,
            registry.config_paths,
            registry.tasks,
            registry.commands,
            registry.evaluation,
        ) = snapshot
        info.registers = {}
        if pm.has_plugin(name):
            pm.unregister(name=name)
        info.error = f"{type(exc).__name__}: {_one_line(str(exc))}"
        if strict:
            raise
        _warn(
            registry,
            f"plugin {name!r} ({dist} {version}) not loaded: {info.error}"
            " (set OMNISTORY_STRICT_PLUGINS=1 for the traceback)",
        )


def check_plugin_module(module: Any, name: str = "plugin") -> Registry:
    """Load one plugin's hook module on its own, exactly as :func:`load_plugins` loads an
    installed one, into a registry of its own, and raise what is refused instead of warning: a
    ``pluggy.PluginValidationError`` for a hook that is not in the specs (with a did-you-mean) or
    has the wrong arguments, the exception of a hook that fails.  ``module``: the module, or a
    callable returning it (an entry point's ``load``).  For plugin authors' tests
    (``omnistory_testkit.check_component``)."""
    registry = Registry()
    pm = _make_manager()
    load = module if callable(module) else (lambda: module)
    _register_plugin(pm, registry, name, load, "unknown", "unknown", strict=True)
    pm.check_pending()  # what _check_hooks may not cover in a later pluggy
    registry.manager = pm
    return registry


def load_plugins(*, force: bool = False) -> Registry:
    """Load the built-in and installed plugins once per process and return the registry."""
    global _registry
    with _lock:
        if _registry is not None and not force:
            _register_unavailable_source(_registry)
            return _registry
        strict = _env_flag("OMNISTORY_STRICT_PLUGINS")
        blocked = {
            b.strip() for b in os.environ.get("OMNISTORY_BLOCK_PLUGINS", "").split(",") if b.strip()
        }
        registry = Registry()
        pm = _make_manager()
        core_version = _core_version()
        _register_plugin(
            pm,
            registry,
            "builtin",
            lambda: importlib.import_module(BUILTIN_PLUGIN),
            "omnistory-core",
            core_version,
            strict=True,
        )
        if not _env_flag("OMNISTORY_DISABLE_PLUGIN_AUTOLOAD"):
            seen: set[str] = {"builtin"}
            for ep in sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
                dist = ep.dist.name if ep.dist else "unknown"
                version = ep.dist.version if ep.dist else "unknown"
                if ep.value == BUILTIN_PLUGIN or ep.name in seen:
                    continue
                seen.add(ep.name)
                if ep.name in blocked or dist in blocked:
                    registry.plugins[ep.name] = PluginInfo(
                        ep.name, dist, version, error="blocked (OMNISTORY_BLOCK_PLUGINS)"
                    )
                    continue
                _register_plugin(pm, registry, ep.name, ep.load, dist, version, strict)
        registry.manager = pm
        if registry.failed():
            # the configs of the failed plugins fail only the jobs that use them
            # (omnistory_core.unavailable); last, after every plugin's own folder
            registry.config_paths.append(UNAVAILABLE_PATH)
        _registry = registry
        _register_unavailable_source(registry)
        return registry


#: the search-path entry of :mod:`omnistory_core.unavailable` (kept in step with its ``PATH``)
UNAVAILABLE_PATH = "omnistory-unavailable://"


def _register_unavailable_source(registry: Registry) -> None:
    """Tell Hydra about :data:`UNAVAILABLE_PATH` when it is on the search path: which configs
    of the failed plugins it answers for, and its scheme.  Only once Hydra is imported: its
    search-path plugin calls :func:`load_plugins` before it opens the sources, so this runs in
    time, and a process that never composes a config imports no Hydra."""
    if UNAVAILABLE_PATH not in registry.config_paths or "hydra" not in sys.modules:
        return
    from omnistory_core.unavailable import UnavailableConfigs, register_source, shipped_config

    shipped: dict[str, str] = {}
    for info in registry.failed():
        for config in sorted(_shipped_configs(info, shipped_config)):
            hint = config_owner_hint(config, registry, guess=False)
            if hint is not None:
                shipped.setdefault(config, hint)
    # the line for any other component config: "{config}" stands for its name
    guess = config_owner_hint("{config}", registry)
    register_source(UnavailableConfigs(shipped, frozenset(registry.components), guess))


def _shipped_configs(info: PluginInfo, config_of: Callable[[str], str | None]) -> set[str]:
    """The configs (``group/name``) among the files of the plugin's distribution."""
    try:
        files = md.distribution(info.distribution).files or []
    except (md.PackageNotFoundError, ValueError):
        return set()
    return {c for f in files if (c := config_of(f.as_posix())) is not None}


def _core_version() -> str:
    try:
        return md.version("omnistory-core")
    except md.PackageNotFoundError:  # running from a source tree without install
        return "0+unknown"


def reset_plugins() -> None:
    """Forget the loaded registry (tests)."""
    global _registry
    with _lock:
        _registry = None
