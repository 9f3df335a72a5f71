"""omnistory-eval's Hydra configs (``pkg://omnistory_eval.conf``: metric/*.yaml, judge/*.yaml).

Importing it registers ``${omnistory_stand_in_metrics:}`` (``suite=demo`` scores with it): the
real-weight stand-in metrics whose packages are installed, found without importing torch.  It
replaces the core's fallback, which knows none.
"""

from __future__ import annotations

import sys

from omegaconf import ListConfig, OmegaConf

#: printed once per process when some stand-in is not installed
HINT = (
    "suite=demo: {missing} not installed (real-weight stand-in metrics); for a leaderboard with"
    " real numbers: pip install './plugins/omnistory-eval[real]'"
)
_hinted: list[bool] = []


def _stand_ins() -> ListConfig:
    from omnistory_eval.metrics.real import DEMO_STAND_INS, installed_stand_ins

    found = installed_stand_ins()
    missing = [n for n in DEMO_STAND_INS if n not in found]
    if missing and not _hinted:
        _hinted.append(True)
        print(HINT.format(missing=", ".join(missing)), file=sys.stderr)
    # a ListConfig: OmegaConf.resolve() cannot store a plain list a resolver returns
    return ListConfig(found)


OmegaConf.register_new_resolver("omnistory_stand_in_metrics", _stand_ins, replace=True)
