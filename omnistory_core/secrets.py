"""Old name of :mod:`omnistory_core.redaction` (keeping secrets out of configs, logs, manifests and
reports; renamed because it shadowed the standard library's ``secrets``).

Kept so that ``import omnistory_core.secrets`` and ``from omnistory_core.secrets import redact``
keep working; it is the very same module object (``sys.modules`` points the old name at the new
module), so private names and monkeypatching behave as before.  New code imports
:mod:`omnistory_core.redaction`.
"""

import sys

from omnistory_core import redaction
from omnistory_core.redaction import *  # noqa: F403  (for static analysis; the line below is what runs)

sys.modules[__name__] = redaction
