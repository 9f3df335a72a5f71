"""Old name of :mod:`omnistory_core.plan_schema` (the JSON-planning schema and the plan parser).

Kept so that ``import omnistory_core.plan`` and ``from omnistory_core.plan import parse_plan`` keep
working; it is the very same module object (``sys.modules`` points the old name at the new module),
so private names and monkeypatching behave as before.  New code imports
:mod:`omnistory_core.plan_schema`.
"""

import sys

from omnistory_core import plan_schema
from omnistory_core.plan_schema import *  # noqa: F403  (for static analysis; the line below is what runs)

sys.modules[__name__] = plan_schema
