"""The module named by the ``omnistory`` entry point: registers ``metric=dreamsim`` and the config
directory holding its yaml.  Imports no torch."""

from __future__ import annotations

from omnistory_core.api import hookimpl
from omnistory_dreamsim.metric import DreamSimMetric


@hookimpl
def register_metrics(register):
    register(DreamSimMetric)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_dreamsim.conf")
