"""``hydra/launcher=omnistory`` (omnistory's default launcher): the jobs of a sweep on this
machine, one after another in this process, or several at once on the devices of
``engine.devices`` (:mod:`hydra_plugins.omnistory_launcher.launcher`)."""

# no `from __future__ import annotations`: Hydra execs this module outside sys.modules when it
# scans for plugins, and dataclasses then cannot resolve string annotations
from dataclasses import dataclass
from typing import Optional

from hydra.core.config_store import ConfigStore


@dataclass
class OmnistoryLauncherConf:
    _target_: str = "hydra_plugins.omnistory_launcher.launcher.OmnistoryLauncher"
    # jobs at once; null: two per device of engine.devices when there are two or more, else 1
    # (one after another, in the sweep's own process)
    jobs: Optional[int] = None  # noqa: UP045 - OmegaConf structured configs
    # a job whose process is killed is started again this many times (the store keeps its calls)
    restarts: int = 1


ConfigStore.instance().store(
    group="hydra/launcher", name="omnistory", node=OmnistoryLauncherConf, provider="omnistory_core"
)
