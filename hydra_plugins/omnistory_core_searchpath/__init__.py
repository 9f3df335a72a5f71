"""Adds installed omnistory plugins' config folders to Hydra's search path, and the config nodes
of components that declare their parameters.

Hydra imports every module under ``hydra_plugins`` at the start of every Hydra app in the
environment, so this stays tiny and only acts for omnistory_core's own app.

Each plugin folder is searched through ``omnistory://<folder>``, which reads the folder as Hydra
would and lays a component's yaml (``tts/parler.yaml``) over the defaults its class declares; a
last ``omnistory://`` entry answers for components that ship no yaml at all (a declared one with
its declared defaults, an undeclared one with its ``name`` alone).  So a yaml holds only what
differs from the declaration, ``tts.temperature=0.7`` works for every declared parameter without
``++``, and ``image=NAME`` works for every registered component.
"""

from __future__ import annotations

from typing import Any

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin

_PRIMARY = "pkg://omnistory_core.conf"
_SCHEME = "omnistory"
#: config groups whose options are components (the group is the component kind)
_GROUPS = ("planner", "image", "tts", "backbone", "metric", "judge")


class OmnistorySearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        if not any(
            e.path == _PRIMARY or (e.path or "").rstrip("/").endswith("omnistory_core/conf")
            for e in search_path.get_path()
        ):
            return
        from omnistory_core.plugins import load_plugins

        for path in load_plugins().config_paths:
            search_path.append(provider="omnistory-plugin", path=f"{_SCHEME}://{path}")
        search_path.append(provider="omnistory-declared", path=f"{_SCHEME}://")


def _declared(group: str, name: Any) -> type | None:
    if group not in _GROUPS or not isinstance(name, str):
        return None
    from omnistory_core.plugins import load_plugins

    cls = load_plugins().components.get((group, name))
    return cls if cls is not None and getattr(cls, "parameters", None) is not None else None


def _registered(group: str, name: Any) -> type | None:
    """Any registered component of a component group: the yaml-less node of one that declares no
    parameters is its ``name`` alone (its keys reach it unchecked, as documented)."""
    if group not in _GROUPS or not isinstance(name, str):
        return None
    from omnistory_core.plugins import load_plugins

    return load_plugins().components.get((group, name))


def _node(cls: type) -> dict[str, Any]:
    from omnistory_core.params import config_node

    return config_node(cls) or {"name": cls.name}


def _split(config_path: str) -> tuple[str, str]:
    path = config_path[: -len(".yaml")] if config_path.endswith(".yaml") else config_path
    group, _, name = path.strip("/").partition("/")
    return (group, name) if name and "/" not in name else ("", "")


class OmnistoryComponentSource(ConfigSource):
    """``omnistory://<inner>``: the inner config folder with component yaml laid over the declared
    defaults; ``omnistory://``: the nodes of registered components without a yaml."""

    def __init__(self, provider: str, path: str) -> None:
        super().__init__(provider=provider, path=path)
        self._inner: ConfigSource | None = None
        if self.path:
            from hydra._internal.sources_registry import SourcesRegistry

            scheme = self.path.split("://", 1)[0]
            self._inner = SourcesRegistry.instance().resolve(scheme)(provider, self.path)

    @staticmethod
    def scheme() -> str:
        return _SCHEME

    def load_config(self, config_path: str) -> ConfigResult:
        from omegaconf import DictConfig, OmegaConf

        from omnistory_core.params import config_node

        group, name = _split(config_path)
        if self._inner is None:
            registered = _registered(group, name)
            if registered is None:
                raise ConfigLoadError(f"Config not found : {config_path}")
            return ConfigResult(
                config=OmegaConf.create(_node(registered)),
                path=self.full_path(),
                provider=self.provider,
                header={"package": None},
            )
        result = self._inner.load_config(config_path)
        config = result.config
        # a yaml with its own defaults list composes other configs: it is left as written
        if group and isinstance(config, DictConfig) and "defaults" not in config:
            cls = _declared(group, config.get("name", name))
            if cls is not None:
                result.config = OmegaConf.merge(OmegaConf.create(config_node(cls)), config)
        return result

    def available(self) -> bool:
        return self._inner.available() if self._inner is not None else True

    def is_group(self, config_path: str) -> bool:
        if self._inner is not None:
            return self._inner.is_group(config_path)
        return config_path.strip("/") in self._groups()

    def is_config(self, config_path: str) -> bool:
        if self._inner is not None:
            return self._inner.is_config(config_path)
        return _registered(*_split(config_path)) is not None

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        if self._inner is not None:
            return self._inner.list(config_path, results_filter)
        path = config_path.strip("/")
        if not path:
            return sorted(self._groups()) if results_filter != ObjectType.CONFIG else []
        if path not in _GROUPS or results_filter == ObjectType.GROUP:
            return []
        from omnistory_core.plugins import load_plugins

        return sorted(n for k, n in load_plugins().components if k == path)

    @staticmethod
    def _groups() -> set[str]:
        from omnistory_core.plugins import load_plugins

        return {k for k, _ in load_plugins().components if k in _GROUPS}
