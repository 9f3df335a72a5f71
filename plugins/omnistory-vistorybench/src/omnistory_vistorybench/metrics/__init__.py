"""The ViStoryBench metrics, ported from the official code's semantics (not its code).

Modules, each light to import (torch, transformers and openai only inside ``load()`` and the
functions that run a model):

* :mod:`.math` -- the pure scoring functions (numpy + scipy), and :data:`.quirks.FIDELITY`, the
  official quirks each metric keeps with ``faithful=True`` and the alternative it offers;
* :mod:`.csd` -- the CSD style encoder and :class:`~.csd.CSDMetric` (``self_csd``,
  ``cross_csd``);
* :mod:`.aesthetic` -- aesthetic-predictor-v2.5 and :class:`~.aesthetic.AestheticMetric`;
* :mod:`.inception` -- Inception v3 probabilities and :class:`~.inception.InceptionScoreMetric`;
* :mod:`.clip_encoder` -- the ``Detector`` / ``Encoder`` protocols of CIDS and the CLIP encoder
  of its non-``realistic_human`` characters;
* :mod:`.grounding` -- the GroundingDINO detector of CIDS (transformers' port on an HF
  checkpoint);
* :mod:`.face` -- the face encoders of CIDS's ``realistic_human`` characters: ArcFace
  (antelopev2's ``glintr100.onnx`` through onnxruntime), AdaFace and FaceNet, and their
  ``face_mix`` ensemble;
* :mod:`.single_action` -- the VLM judge of ``single_character_action`` over CIDS's matched
  crops;
* :mod:`.cids` -- :class:`~.cids.CIDSMetric` (``cids_cross_mean``, ``cids_self_mean``,
  ``occm``, ``copy_paste_score``, ``single_character_action``) over pluggable detectors and
  encoders;
* :mod:`.prompt_align` -- the GPT judge of prompt alignment and
  :class:`~.prompt_align.PromptAlignMetric` (``scene``, ``camera``, ``character_action``).

:data:`METRICS` names the metric classes as ``module:Class`` strings so that registering them
imports nothing heavy.
"""

from __future__ import annotations

#: every metric class of the plugin, as ``module:attribute`` (imported when registered)
METRICS: tuple[str, ...] = (
    "omnistory_vistorybench.metrics.cids:CIDSMetric",
    "omnistory_vistorybench.metrics.csd:CSDMetric",
    "omnistory_vistorybench.metrics.aesthetic:AestheticMetric",
    "omnistory_vistorybench.metrics.inception:InceptionScoreMetric",
    "omnistory_vistorybench.metrics.prompt_align:PromptAlignMetric",
)


def metric_classes() -> list[type]:
    """The metric classes of :data:`METRICS` (imports their modules, which stay light)."""
    import importlib

    out = []
    for spec in METRICS:
        module, _, attr = spec.partition(":")
        out.append(getattr(importlib.import_module(module), attr))
    return out


__all__ = ["METRICS", "metric_classes"]
