"""Configs of plugins that failed to load: the jobs that need one fail, not the whole sweep.

A plugin that cannot be imported, or whose hook module does not validate (a misspelt hook name),
registers nothing, so Hydra cannot find its configs (``tts=fancy``, ``system=fancy_preset``).
Hydra stops on a config it cannot find while it composes a job: in a sweep that stops every job,
the built-in systems' included.  This config source (last on the search path, only while a plugin
failed to load; :func:`omnistory_core.plugins.load_plugins` adds it) answers for those configs
instead (what it answers is computed by the plugin loader, which imports this module, never the
other way round), with a node that marks them unavailable::

    omnistory_unavailable: {"tts/fancy": "'tts/fancy' is shipped by plugin 'fancy' (...), which
                            failed to load: ModuleNotFoundError: ...; run ..."}
    tts: {name: fancy}

and the job refuses to run with that one line (:func:`omnistory_core.app.check_available`,
``job_error.json`` in a sweep, exit 2 for a single run).  It answers for

* a component config (planner, image, tts, backbone) whose component is not registered: the
  failed plugin's distribution ships ``<group>/<name>.yaml``, or (a component declared without a
  yaml) any failed plugin may provide it;
* a preset, dataset or task config (``system``, ``dataset``, ``task``) a failed plugin's
  distribution ships.

Nothing else: a config nothing ships is Hydra's "Could not find" (with the hint naming the failed
plugins), and ``list`` is empty, so ``--help`` and ``glob(*)`` show only what works.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource

#: the top-level key of a job's config that names the unavailable configs it uses
MARKER = "omnistory_unavailable"
SCHEME = "omnistory-unavailable"
#: where this source's entry goes on the search path (``registry.config_paths``)
PATH = f"{SCHEME}://"
#: groups whose options are components: a config for an unregistered one may be a failed
#: plugin's, also without a yaml (its declaration makes the node)
COMPONENT_GROUPS = ("planner", "image", "tts", "backbone")
#: groups whose configs only a distribution's files can tell apart
SHIPPED_GROUPS = ("system", "dataset", "task")


@dataclass(frozen=True)
class UnavailableConfigs:
    """What the source answers for, from the plugin loader: ``shipped`` maps ``group/name`` to
    the line that names the failed plugin shipping it; ``registered`` holds the components that
    did register (``(kind, name)``: their own yaml or declaration answers); ``guess`` is the line
    for another component config, ``{config}`` standing for it, or None."""

    shipped: dict[str, str] = field(default_factory=dict)
    registered: frozenset[tuple[str, str]] = frozenset()
    guess: str | None = None

    def reason(self, group: str, name: str) -> str | None:
        """Why ``<group>/<name>`` cannot be used, or None when this source does not answer."""
        config = f"{group}/{name}"
        if group in COMPONENT_GROUPS:
            if (group, name) in self.registered:
                return None
            if config in self.shipped:
                return self.shipped[config]
            return self.guess.replace("{config}", config) if self.guess else None
        if group in SHIPPED_GROUPS:
            return self.shipped.get(config)
        return None


def _split(config_path: str) -> tuple[str, str]:
    path = config_path[: -len(".yaml")] if config_path.endswith(".yaml") else config_path
    group, _, name = path.strip("/").partition("/")
    return (group, name) if name and "/" not in name else ("", "")


def shipped_config(relative_path: str) -> str | None:
    """``group/name`` for a distribution's file that is a config of one of the groups here
    (``mypkg/conf/tts/fancy.yaml`` -> ``tts/fancy``), else None."""
    parts = relative_path.replace("\\", "/").split("/")
    if len(parts) < 2 or not parts[-1].endswith(".yaml"):
        return None
    group, name = parts[-2], parts[-1][: -len(".yaml")]
    return f"{group}/{name}" if group in COMPONENT_GROUPS + SHIPPED_GROUPS else None


def placeholder(group: str, name: str, reason: str) -> dict[str, Any]:
    """The node that stands for the unavailable config (``_global_`` package): the marker, and
    what keeps the job's directory apart from the others of a sweep (the component's name, a
    preset's ``system_id``)."""
    node: dict[str, Any] = {MARKER: {f"{group}/{name}": reason}}
    if group == "system":
        node["system_id"] = name
    else:
        node[group] = {"name": name}
    return node


class UnavailableConfigSource(ConfigSource):
    """``omnistory-unavailable://``: stand-ins for the configs of plugins that failed to load."""

    #: set by :func:`register_source` before Hydra opens its sources
    current: ClassVar[UnavailableConfigs] = UnavailableConfigs()

    def __init__(self, provider: str, path: str) -> None:
        super().__init__(provider=provider, path=path)
        # an instance of its own: a launcher pickles the sources to compose jobs elsewhere
        self.configs = type(self).current

    @staticmethod
    def scheme() -> str:
        return SCHEME

    def load_config(self, config_path: str) -> ConfigResult:
        from omegaconf import OmegaConf

        group, name = _split(config_path)
        reason = self.configs.reason(group, name) if group else None
        if reason is None:
            raise ConfigLoadError(f"Config not found : {config_path}")
        return ConfigResult(
            config=OmegaConf.create(placeholder(group, name, reason)),
            path=f"{SCHEME}://{group}/{name}",
            provider=self.provider,
            header={"package": "_global_"},
        )

    def available(self) -> bool:
        return True

    def is_group(self, config_path: str) -> bool:
        path = config_path.strip("/")
        return path in COMPONENT_GROUPS or path in SHIPPED_GROUPS

    def is_config(self, config_path: str) -> bool:
        group, name = _split(config_path)
        return bool(group) and self.configs.reason(group, name) is not None

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        return []  # nothing here is an option to offer


def register_source(configs: UnavailableConfigs) -> None:
    """What the source answers for, and its scheme made known to Hydra (which discovers only the
    config sources of ``hydra_plugins`` packages by itself)."""
    from hydra._internal.sources_registry import SourcesRegistry

    UnavailableConfigSource.current = configs
    SourcesRegistry.instance().register(UnavailableConfigSource)


__all__ = [
    "COMPONENT_GROUPS",
    "MARKER",
    "PATH",
    "SCHEME",
    "SHIPPED_GROUPS",
    "UnavailableConfigSource",
    "UnavailableConfigs",
    "placeholder",
    "register_source",
    "shipped_config",
]
