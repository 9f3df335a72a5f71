"""The Hydra configs of omnistory-vistorybench: ``task/``, ``dataset/``, ``image/``, ``system/``,
``metric/`` and ``suite/``.

Importing it (Hydra does, reading ``pkg://omnistory_vistorybench.conf``) registers
``${vistory_demo_overrides:DIR}``, which ``suite=vistory_demo`` scores with: the tiny random
checkpoints of :mod:`omnistory_vistorybench.demo`, built into ``DIR`` on first use (torch is
imported only then).
"""

from __future__ import annotations

from omegaconf import ListConfig, OmegaConf


def _demo_overrides(root: str) -> ListConfig:
    from omnistory_vistorybench.demo import demo_overrides

    # a ListConfig: OmegaConf.resolve() cannot store a plain list a resolver returns
    return ListConfig(demo_overrides(root))


if not OmegaConf.has_resolver("vistory_demo_overrides"):
    OmegaConf.register_new_resolver("vistory_demo_overrides", _demo_overrides)
