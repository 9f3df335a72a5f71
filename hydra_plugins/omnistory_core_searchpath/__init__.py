"""Adds installed omnistory plugins' config folders to Hydra's search path.

Hydra imports every module under ``hydra_plugins`` at the start of every Hydra app in the
environment, so this stays tiny and only acts for omnistory_core's own app.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

_PRIMARY = "pkg://omnistory_core.conf"


class OmnistorySearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        if not any(
            e.path == _PRIMARY or (e.path or "").rstrip("/").endswith("omnistory_core/conf")
            for e in search_path.get_path()
        ):
            return
        from omnistory_core.plugins import load_plugins

        for path in load_plugins().config_paths:
            search_path.append(provider="omnistory-plugin", path=path)
