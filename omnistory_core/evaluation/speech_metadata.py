"""Old name of :mod:`omnistory_core.evaluation.speech_analysis` (the audio analysis and labelling
rules behind the ``speech_meta`` metric).

Kept so that ``import omnistory_core.evaluation.speech_metadata`` and ``from
omnistory_core.evaluation.speech_metadata import speed_label`` keep working; it is the very same
module object (``sys.modules`` points the old name at the new module), so private names and
monkeypatching behave as before.  New code imports
:mod:`omnistory_core.evaluation.speech_analysis`.
"""

import sys

from omnistory_core.evaluation import speech_analysis
from omnistory_core.evaluation.speech_analysis import *  # noqa: F403  (for static analysis; the line below is what runs)

sys.modules[__name__] = speech_analysis
