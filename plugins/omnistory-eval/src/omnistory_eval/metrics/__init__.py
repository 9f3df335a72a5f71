"""The paper's automatic metrics (App. E.1-E.2) as evaluator components.

========================  =======  ==================================  ==========================
component                 track    criteria                            reads
========================  =======  ==================================  ==========================
``bertscore``             text     ``f1``                              candidate/reference text
``clip``                  image    ``cosine``                          candidate/reference image
``speech_meta``           speech   ``emotion speed pitch gender`` 0/1  candidate speech, target
                                                                       speech labels
========================  =======  ==================================  ==========================

Importing this package imports no torch/transformers; each metric loads its models in ``load()``.
Every metric class has ``checkpoints(params) -> list[str]``, the hub ids a configuration needs
(for a prefetch command).  DreamSim (App. F.2) is the optional plugin
``plugins/omnistory-dreamsim``.
"""

from __future__ import annotations

from omnistory_eval.metrics.bertscore import BERTScoreMetric
from omnistory_eval.metrics.clip import CLIPMetric
from omnistory_eval.metrics.speech_meta import SpeechMetaMetric

METRICS = (BERTScoreMetric, CLIPMetric, SpeechMetaMetric)

__all__ = ["BERTScoreMetric", "CLIPMetric", "METRICS", "SpeechMetaMetric"]
