"""BERTScore F1 between the generated and the gold next narration (paper App. E.1, Eq. 1).

The paper's call is ``bert_score.BERTScorer(lang="en", rescale_with_baseline=False)``, i.e.
``roberta-large`` with its tuned layer 17, no idf, and precision/recall/F1 computed internally; the
F1 is reported.  ``model_type`` / ``num_layers`` select another checkpoint (a local directory needs
``num_layers``, since bert_score only knows the layers of hub ids).

Tokenization under transformers 5: bert_score 0.3.13 encodes RoBERTa/GPT-2 inputs with
``tokenizer.encode(..., add_prefix_space=True)``, written for transformers 4.x slow tokenizers.
transformers 5 has no slow BPE tokenizers and its tokenizers-backed ``RobertaTokenizer`` ignores
that per-call argument, so the first word is encoded without its leading-space marker (``Mina``
instead of ``ĠMina``) and scores differ slightly from transformers 4.x. The public harness of the
paper ran bert_score in a transformers-5-based environment (its environment files pin a transformers
git revision together with huggingface_hub 1.10.2, which transformers 4.x cannot use), so the
default here keeps that behaviour. ``restore_prefix_space=True`` reloads the tokenizer with
``add_prefix_space=True``, which reproduces the transformers-4.x token ids exactly (checked against
transformers 4.57.6's slow tokenizer). The effective behaviour is recorded in every result's
``detail["first_word_prefix_space"]``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from omnistory_core.components import EvalResult, Metric
from omnistory_core.params import Param
from omnistory_eval.metrics._common import (
    load_or_skip,
    release_torch_memory,
    require_text,
    resolve_device,
)

PAPER_MODEL = "roberta-large"  # what BERTScorer(lang="en") resolves to


class BERTScoreMetric(Metric):
    """``bertscore``/``f1``: BERTScore F1 of candidate vs reference narration.

    Parameters: ``model_type`` (None = the paper default via ``lang``), ``num_layers`` (None = the
    layer bert_score tuned for ``model_type``), ``lang`` ("en"), ``idf`` (False),
    ``rescale_with_baseline`` (False), ``use_fast_tokenizer`` (False), ``restore_prefix_space``
    (False; see the module docstring), ``device`` ("auto"), ``batch_size`` (64).  ``device`` and
    ``batch_size`` do not change scores.
    """

    name = "bertscore"
    version = "1"
    track = "text"
    criteria = ("f1",)
    reads = ("candidate_text", "reference_text")
    default_batch_size = 64
    description = "BERTScore F1 (bert_score.BERTScorer, lang=en, no baseline rescaling)"
    parameters = (
        Param("lang", str, "en", "bert_score's lang (picks the default model_type)"),
        Param("model_type", str, None, "checkpoint; null: bert_score's English default"),
        Param(
            "num_layers",
            int,
            None,
            "layer; null: the one bert_score tuned for model_type (17 for roberta-large)",
            ge=1,
        ),
        Param("idf", bool, False, "idf weighting (from the references)"),
        Param("rescale_with_baseline", bool, False, "rescale with bert_score's baseline"),
        Param("use_fast_tokenizer", bool, False, "bert_score's use_fast_tokenizer"),
        Param(
            "restore_prefix_space",
            bool,
            False,
            "false: tokenize as the paper's transformers-5 environment did (first word without the"
            " RoBERTa space marker); true: as bert_score on transformers 4.x",
        ),
        Param("device", (str, None), "auto", "auto | cpu | cuda[:N]", runtime=True),
    )

    #: bert_score checks isinstance against these classes before passing add_prefix_space
    _PREFIX_SPACE_TOKENIZERS: ClassVar[tuple[str, ...]] = ("RobertaTokenizer", "GPT2Tokenizer")

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._scorer: Any = None
        self.first_word_prefix_space: bool | None = None

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        """Hub ids this configuration needs (for prefetching)."""
        return [params.get("model_type") or PAPER_MODEL]

    def preflight_needs(self) -> list[Any]:
        """Packages and checkpoint, checked by ``evaluate`` before scoring anything."""
        from omnistory_eval.preflight import METRICS_EXTRA, package_need, weights_need

        needs = [package_need(m, METRICS_EXTRA) for m in ("bert_score", "transformers", "torch")]
        return needs + [weights_need(c, "metric=bertscore") for c in self.checkpoints(self.params)]

    def load(self) -> None:
        from omnistory_core.kit.hub import load_cache_first

        load_cache_first(self.checkpoints(self.params), self._load)

    def resolved_model_type(self) -> str | None:
        """The ``model_type`` handed to bert_score (None: its default for ``lang``); a subclass
        that finds its checkpoint elsewhere (an installed package) overrides this."""
        return self.params["model_type"]

    def _load(self) -> None:
        from bert_score import BERTScorer

        p = self.params
        model_type = self.resolved_model_type()
        model = model_type or PAPER_MODEL
        if p["idf"]:
            raise ValueError(
                "bertscore: idf=True needs reference sentences up front; not supported"
            )
        self._scorer = load_or_skip(
            model,
            lambda: BERTScorer(
                model_type=model_type,
                num_layers=p["num_layers"],
                lang=p["lang"],
                rescale_with_baseline=bool(p["rescale_with_baseline"]),
                use_fast_tokenizer=bool(p["use_fast_tokenizer"]),
                batch_size=self.batch_size,
                device=resolve_device(p.get("device")),
            ),
        )
        if p["restore_prefix_space"]:
            self._restore_prefix_space()
        self.first_word_prefix_space = self._first_word_prefix_space()

    def _restore_prefix_space(self) -> None:
        """Reload a RoBERTa/GPT-2 tokenizer with a prefix-space pre-tokenizer (transformers >= 5);
        no-op for other tokenizers and where bert_score's own argument still works."""
        import transformers
        from packaging.version import Version

        tok = self._scorer._tokenizer  # bert_score keeps it private; its API has no setter
        if Version(transformers.__version__).major < 5:
            return
        if type(tok).__name__ not in self._PREFIX_SPACE_TOKENIZERS:
            return
        from transformers import AutoTokenizer

        self._scorer._tokenizer = AutoTokenizer.from_pretrained(
            self._scorer.model_type, add_prefix_space=True
        )

    def _first_word_prefix_space(self) -> bool | None:
        """Whether the first word gets a byte-level space marker (None: not a byte-level BPE)."""
        if type(self._scorer._tokenizer).__name__ not in self._PREFIX_SPACE_TOKENIZERS:
            return None
        return self.tokenize("a")[1].startswith("Ġ")

    def unload(self) -> None:
        self._scorer = None
        release_torch_memory()

    def tokenize(self, text: str) -> list[str]:
        """The tokens BERTScore embeds for ``text`` (after :meth:`load`); for audits and tests."""
        from bert_score.utils import sent_encode

        tok = self._scorer._tokenizer
        return tok.convert_ids_to_tokens(sent_encode(tok, text))

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        cands = [require_text(item, "candidate_text") for item in items]
        refs = [require_text(item, "reference_text") for item in items]
        precision, recall, f1 = self._scorer.score(cands, refs, batch_size=self.batch_size)
        detail_base = {
            "model": self._scorer.model_type,
            "num_layers": self._scorer.num_layers,
            "first_word_prefix_space": self.first_word_prefix_space,
        }
        return [
            EvalResult(
                scores={"f1": float(f1[i])},
                detail={
                    **detail_base,
                    "precision": float(precision[i]),
                    "recall": float(recall[i]),
                },
            )
            for i in range(len(items))
        ]
