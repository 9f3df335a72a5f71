"""Old name of :mod:`omnistory_core.environments` (``python -m
omnistory_core env create``: a virtual environment for one component).

Kept so that ``import omnistory_core.envs`` and ``from omnistory_core.envs import create`` keep
working; it is the very same module object (``sys.modules`` points the old name at the new module),
so private names and monkeypatching behave as before.  New code imports
:mod:`omnistory_core.environments`.
"""

import sys

from omnistory_core import environments
from omnistory_core.environments import *  # noqa: F403  (for static analysis; the line below is what runs)

sys.modules[__name__] = environments
