"""omnistory's Hydra configs (shipped as the package ``omnistory_core.conf``).

Importing it registers the ``omnistory_system_id`` resolver that ``config.yaml`` uses, so the
Hydra app and the compose API (tests, notebooks) resolve ``system_id`` alike.
"""

from omegaconf import OmegaConf


def _system_id(*, _root_):
    from omnistory_core.engine.system import derived_system_id

    return derived_system_id(_root_)


if not OmegaConf.has_resolver("omnistory_system_id"):
    OmegaConf.register_new_resolver("omnistory_system_id", _system_id)
