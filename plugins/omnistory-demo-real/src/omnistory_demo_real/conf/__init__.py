"""The suite's Hydra configs (``pkg://omnistory_demo_real.conf``).

Importing it registers the ``omnistory_demo_real_gguf`` resolver that the llamacpp preset uses
for ``planner.model``, so the Hydra app and the compose API resolve it alike.
"""

from omegaconf import OmegaConf


def _gguf() -> str | None:
    from omnistory_demo_real.models import planner_gguf

    path = planner_gguf()
    return None if path is None else str(path)


if not OmegaConf.has_resolver("omnistory_demo_real_gguf"):
    # use_cache: the file is located (and assembled, once) a single time per process
    OmegaConf.register_new_resolver("omnistory_demo_real_gguf", _gguf, use_cache=True)
