"""Old name of :mod:`omnistory_core.experts.voices` (the deterministic voice choice shared by
the TTS experts).

Kept so that ``import omnistory_core.voices`` and ``from omnistory_core.voices import voice_for``
keep working; it is the very same module object (``sys.modules`` points the old name at the new
module), so private names and monkeypatching behave as before.  New code imports
:mod:`omnistory_core.experts.voices`.
"""

import sys

from omnistory_core.experts import voices
from omnistory_core.experts.voices import *  # noqa: F403  (for static analysis; the line below is what runs)

sys.modules[__name__] = voices
