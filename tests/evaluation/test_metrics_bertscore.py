"""BERTScore through bert_score's real loading path on a tiny RoBERTa built by the test."""

from __future__ import annotations

import pytest

pytest.importorskip("bert_score")
pytest.importorskip("transformers")

from omnistory_eval.metrics.bertscore import BERTScoreMetric  # noqa: E402
from omnistory_testkit.metric_checkpoints import build_tiny_roberta  # noqa: E402

from omnistory_core.components import ComponentError  # noqa: E402

PAIRS = [
    ("Mina saw a little boat on the river.", "The fox ran to the river and saw a boat."),
    ("Grandmother told a story.", "Grandmother told a story."),
    ("The bird sang.", "A song about the moon and the stars."),
]


@pytest.fixture(scope="module")
def tiny_roberta(tmp_path_factory):
    return build_tiny_roberta(tmp_path_factory.mktemp("roberta"))


@pytest.fixture(scope="module")
def metric(tiny_roberta):
    m = BERTScoreMetric(model_type=str(tiny_roberta), num_layers=2, device="cpu", batch_size=2)
    m.load()
    yield m
    m.unload()


def items(pairs):
    return [{"candidate_text": c, "reference_text": r} for c, r in pairs]


def test_defaults_are_the_papers_call():
    m = BERTScoreMetric()
    assert m.params["lang"] == "en" and m.params["model_type"] is None
    assert m.params["rescale_with_baseline"] is False and m.params["idf"] is False
    assert m.params["restore_prefix_space"] is False
    assert BERTScoreMetric.checkpoints({}) == ["roberta-large"]
    assert (m.track, m.criteria, m.reads) == ("text", ("f1",), ("candidate_text", "reference_text"))


def test_scores_are_f1_with_precision_and_recall_in_detail(metric):
    results = metric.run_batch(items(PAIRS))
    assert [r.status for r in results] == ["ok"] * 3
    assert results[1].scores["f1"] == pytest.approx(1.0, abs=1e-5)  # identical sentences
    for r in results:
        p, rec, f1 = r.detail["precision"], r.detail["recall"], r.scores["f1"]
        assert f1 == pytest.approx(2 * p * rec / (p + rec), rel=1e-4)
    assert results[0].scores["f1"] < 0.999 and results[2].scores["f1"] < 0.999


def test_precision_and_recall_swap_with_the_arguments(metric):
    (forward,) = metric.run_batch(items(PAIRS[:1]))
    (backward,) = metric.run_batch(items([(PAIRS[0][1], PAIRS[0][0])]))
    assert forward.detail["precision"] == pytest.approx(backward.detail["recall"], rel=1e-5)
    assert forward.scores["f1"] == pytest.approx(backward.scores["f1"], rel=1e-5)


def test_batched_equals_one_by_one(metric):
    batched = [r.scores["f1"] for r in metric.run_batch(items(PAIRS))]
    single = [metric.run_batch(items([p]))[0].scores["f1"] for p in PAIRS]
    assert batched == pytest.approx(single, abs=1e-5)


def test_default_tokenization_is_the_papers_transformers_5_behaviour(metric):
    # bert_score's per-call add_prefix_space=True is ignored by transformers-5 tokenizers: the
    # first word is encoded without the "Ġ" space marker, as in the paper's environment
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers 4.x adds the prefix space itself")
    tokens = metric.tokenize("Mina saw a boat")
    assert tokens[0] == "<s>" and tokens[-1] == "</s>"
    assert not tokens[1].startswith("Ġ")
    assert metric.first_word_prefix_space is False
    (res,) = metric.run_batch(items(PAIRS[:1]))
    assert res.detail["first_word_prefix_space"] is False


def test_restore_prefix_space_gives_the_transformers_4_tokens(tiny_roberta, metric):
    m = BERTScoreMetric(
        model_type=str(tiny_roberta), num_layers=2, device="cpu", restore_prefix_space=True
    )
    m.load()
    tokens = m.tokenize("Mina saw a boat")
    assert tokens[1].startswith("Ġ")
    assert tokens == m.tokenize(" Mina saw a boat")  # the space marker is the only change
    assert m.first_word_prefix_space is True
    assert m.output_params() != metric.output_params()  # different cache identity
    restored = m.run_batch(items(PAIRS[:1]))[0].scores["f1"]
    default = metric.run_batch(items(PAIRS[:1]))[0].scores["f1"]
    assert restored != pytest.approx(default, abs=1e-7)


def test_num_layers_changes_the_score(tiny_roberta):
    scores = []
    for layers in (1, 3):
        m = BERTScoreMetric(model_type=str(tiny_roberta), num_layers=layers, device="cpu")
        m.load()
        scores.append(m.run_batch(items(PAIRS[:1]))[0].scores["f1"])
    assert scores[0] != pytest.approx(scores[1], abs=1e-6)


def test_missing_checkpoint_is_reported_as_skipped(tmp_path):
    m = BERTScoreMetric(model_type=str(tmp_path / "no-such-model"), num_layers=1, device="cpu")
    with pytest.raises(ComponentError, match=r"^skipped: .*no-such-model not available offline"):
        m.load()


def test_non_string_input_is_a_clear_error(metric):
    with pytest.raises(ValueError, match="'candidate_text' must be a string"):
        metric.run_batch([{"candidate_text": None, "reference_text": "x"}])
