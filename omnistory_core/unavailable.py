"""Configs of plugins that failed to load: the jobs that need one fail, not the whole sweep.

A plugin that cannot be imported, or whose hook module does not validate (a misspelt hook name),
registers nothing, so Hydra cannot find its configs (``tts=fancy``, ``system=fancy_preset``).
Hydra stops on a config it cannot find while it composes a job: in a sweep that stops every job,
the built-in systems' included.  This config source (last on the search path, only while a plugin
failed to load; :func:`omnistory_core.plugins.load_plugins` adds it) answers for those configs
instead, with a node that marks them unavailable::

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

from typing import Any

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


def _split(config_path: str) -> tuple[str, str]:
    path = config_path[: -len(".yaml")] if config_path.endswith(".yaml") else config_path
    group, _, name = path.strip("/").partition("/")
    return (group, name) if name and "/" not in name else ("", "")


def unavailable_reason(group: str, name: str, registry: Any = None) -> str | None:
    """Why ``<group>/<name>`` cannot be used (one line naming the failed plugin), or None when
    this source does not answer for it."""
    from omnistory_core.plugins import config_owner_hint, load_plugins

    if group not in COMPONENT_GROUPS and group not in SHIPPED_GROUPS:
        return None
    registry = registry or load_plugins()
    if not registry.failed():
        return None
    if group in COMPONENT_GROUPS and (group, name) in registry.components:
        return None  # registered: its yaml or its declaration answers
    return config_owner_hint(f"{group}/{name}", registry, guess=group in COMPONENT_GROUPS)


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

    def __init__(self, provider: str, path: str) -> None:
        super().__init__(provider=provider, path=path)

    @staticmethod
    def scheme() -> str:
        return SCHEME

    def load_config(self, config_path: str) -> ConfigResult:
        from omegaconf import OmegaConf

        group, name = _split(config_path)
        reason = unavailable_reason(group, name) if group else None
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
        return bool(group) and unavailable_reason(group, name) is not None

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        return []  # nothing here is an option to offer


def register_source() -> None:
    """Make the scheme known to Hydra (idempotent); Hydra discovers only the config sources of
    ``hydra_plugins`` packages by itself."""
    from hydra._internal.sources_registry import SourcesRegistry

    SourcesRegistry.instance().register(UnavailableConfigSource)


__all__ = [
    "MARKER",
    "PATH",
    "SCHEME",
    "UnavailableConfigSource",
    "placeholder",
    "register_source",
    "unavailable_reason",
]
