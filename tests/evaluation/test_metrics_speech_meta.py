"""speech_meta through its real loading code on tiny stand-ins built by the test.

Built small here: Whisper (word timestamps through the ASR pipeline), the audeering age/gender
architecture (custom heads), superb's HuBERT emotion classifier.  SpeechBrain's foreign_class
checkpoint and funasr's emotion2vec cannot be built small in this environment (SpeechBrain needs
torchaudio, which does not import beside this torch build; emotion2vec needs funasr's model zoo),
so here their output parsing is tested on their documented output shapes and the isolation route
(the worker process) with the HuBERT backend.  With an interpreter that has speechbrain and funasr
(``OMNISTORY_SPEECH_PYTHON``, default ``.venvs/tts/bin/python``, which scripts/test.sh builds), the
last test also runs both through their real loaders (``foreign_class``, ``funasr.AutoModel``) on
local stand-ins built in that interpreter, as workers of the full three-member ensemble.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("librosa")

from omnistory_eval import speech_analysis as sm  # noqa: E402
from omnistory_eval.metrics import emotion_backends  # noqa: E402
from omnistory_eval.metrics.age_gender import AgeGenderClassifier  # noqa: E402
from omnistory_eval.metrics.asr import WhisperWordTimestamps  # noqa: E402
from omnistory_eval.metrics.emotion import EmotionEnsemble  # noqa: E402
from omnistory_eval.metrics.speech_meta import SpeechMetaMetric  # noqa: E402
from omnistory_testkit.metric_checkpoints import (  # noqa: E402
    build_tiny_age_gender,
    build_tiny_hubert_er,
    build_tiny_whisper,
    synthetic_voice,
    tiny_speech_meta_params,
    write_wav,
)

from omnistory_core.components import ComponentError, Media  # noqa: E402

REF = {
    "utterance": "Look, a boat!",
    "speaker": "Mina",
    "emotion": "Happy",
    "speed": "normal",
    "pitch": "normal",
    "gender": "female",
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("speech-models")
    return {
        "whisper": build_tiny_whisper(root / "whisper"),
        "age_gender": build_tiny_age_gender(root / "age_gender"),
        "hubert": build_tiny_hubert_er(root / "hubert"),
    }


@pytest.fixture(scope="module")
def wavs(tmp_path_factory):
    d = tmp_path_factory.mktemp("wavs")
    out = {}
    for name, f0, seconds in [("low_short", 110.0, 1.0), ("high_long", 230.0, 4.5)]:
        path = write_wav(d / f"{name}.wav", synthetic_voice(f0, seconds, syllables_per_second=3))
        out[name] = Media(str(path), name)
    broken = d / "broken.wav"
    broken.write_bytes(b"RIFF....not really")
    out["broken"] = Media(str(broken), "broken")
    return out


@pytest.fixture(scope="module")
def metric(models):
    m = SpeechMetaMetric(**tiny_speech_meta_params(models))
    m.load()
    yield m
    m.unload()


@pytest.fixture(scope="module")
def batch_results(metric, wavs):
    items = [
        {"candidate_speech": wavs[n], "reference_speech": REF} for n in ("low_short", "high_long")
    ]
    return items, metric.run_batch(items)


# --- audeering age/gender ------------------------------------------------------------------


def test_age_gender_architecture_round_trips_every_weight(models):
    from omnistory_eval.metrics._age_gender_nn import AgeGenderModel
    from safetensors.torch import load_file

    saved = load_file(str(models["age_gender"] / "model.safetensors"))
    assert {k.split(".")[0] for k in saved} == {"wav2vec2", "age", "gender"}
    assert (
        saved["gender.out_proj.weight"].shape[0] == 3 and saved["age.out_proj.weight"].shape[0] == 1
    )
    loaded = AgeGenderModel.from_pretrained(models["age_gender"]).state_dict()
    for key, tensor in saved.items():
        assert torch.equal(loaded[key], tensor), key


def test_gender_windows_probabilities_and_batching(models):
    clf = AgeGenderClassifier(str(models["age_gender"]), "cpu", batch_size=4)
    clf.load()
    short = synthetic_voice(120.0, 1.0)
    long = synthetic_voice(220.0, 4.5)
    a, b = clf.predict([short, long])
    assert a.windows == 1 and b.windows == 2
    for pred in (a, b):
        assert sum(pred.probabilities.values()) == pytest.approx(1.0, abs=1e-5)
        assert pred.label == sm.binarize_gender(
            pred.probabilities["female"], pred.probabilities["male"]
        )
    # the two 3 s windows of `long`, scored one at a time, average to the batched result
    windows = [long[s:e] for s, e in sm.gender_windows(len(long))]
    one_by_one = [clf.window_probabilities([w])[0] for w in windows]
    mean = np.mean(one_by_one, axis=0)
    got = [b.probabilities[k] for k in ("female", "male", "child")]
    assert got == pytest.approx(mean.tolist(), abs=1e-5)


# --- Whisper word timestamps ---------------------------------------------------------------


def test_whisper_pipeline_returns_word_chunks_with_timestamps(models):
    asr = WhisperWordTimestamps(str(models["whisper"]), "cpu", batch_size=2)
    asr.load()
    out = asr.transcribe([synthetic_voice(150.0, 2.0), synthetic_voice(200.0, 1.0)])
    assert len(out) == 2
    for transcript in out:
        assert isinstance(transcript.text, str)
        assert transcript.chunks, "word-level chunks expected from return_timestamps='word'"
        for chunk in transcript.chunks:
            start, end = chunk["timestamp"]
            assert isinstance(chunk["text"], str) and 0.0 <= start <= end
        json.dumps(transcript.to_detail())  # audit detail must be JSON-able
    import transformers

    if int(transformers.__version__.split(".")[0]) >= 5:
        assert asr.effective_num_beams == 5  # the pipeline's default beam search
    greedy = WhisperWordTimestamps(str(models["whisper"]), "cpu", num_beams=1)
    greedy.load()
    assert greedy.effective_num_beams == 1
    assert greedy.transcribe([synthetic_voice(150.0, 1.0)])[0].chunks


# --- emotion: HuBERT in process and through the worker -------------------------------------


def hubert_reference(model_dir, wave):
    """superb's classifier run directly with transformers, canonicalized by hand."""
    from transformers import AutoFeatureExtractor, AutoModelForAudioClassification

    fe = AutoFeatureExtractor.from_pretrained(model_dir)
    net = AutoModelForAudioClassification.from_pretrained(model_dir).eval()
    with torch.no_grad():
        probs = torch.softmax(
            net(**fe(wave, sampling_rate=16000, return_tensors="pt")).logits[0], -1
        )
    names = {"neu": "neutral", "hap": "happy", "ang": "angry", "sad": "sad"}
    return {names[net.config.id2label[i]]: float(p) for i, p in enumerate(probs)}


def test_hubert_member_in_process(models):
    ens = EmotionEnsemble({"hubert": str(models["hubert"])}, "cpu")
    ens.start()
    waves = [synthetic_voice(150.0, 1.0), synthetic_voice(260.0, 2.0)]
    preds = ens.predict(waves)
    ens.close()
    for wave, pred in zip(waves, preds, strict=True):
        expected = hubert_reference(models["hubert"], wave)
        assert pred.members["hubert"] == pytest.approx(expected, abs=1e-5)
        assert pred.probabilities == pytest.approx(expected, abs=1e-5)  # one member: its own
        assert pred.label == max(sm.CANONICAL_EMOTIONS, key=lambda k: expected[k])


def test_worker_route_gives_the_same_distribution(models):
    waves = [synthetic_voice(150.0, 1.0), synthetic_voice(260.0, 2.0)]
    local = EmotionEnsemble({"hubert": str(models["hubert"])}, "cpu")
    local.start()
    expected = local.predict(waves)
    local.close()
    remote = EmotionEnsemble(
        {"hubert": str(models["hubert"])}, "cpu", python={"hubert": sys.executable}
    )
    remote.start()
    try:
        got = remote.predict(waves)
        again = remote.predict(waves[:1])  # the worker keeps serving
    finally:
        remote.close()
    for e, g in zip(expected, got, strict=True):
        assert g.label == e.label
        assert g.probabilities == pytest.approx(e.probabilities, abs=1e-6)
    assert again[0].probabilities == pytest.approx(expected[0].probabilities, abs=1e-6)


def test_worker_that_cannot_load_is_skipped(tmp_path):
    ens = EmotionEnsemble(
        {"hubert": str(tmp_path / "missing")}, "cpu", python={"hubert": sys.executable}
    )
    with pytest.raises(ComponentError, match="^skipped: .*missing"):
        ens.start()


def test_worker_with_a_missing_interpreter_is_skipped(models, tmp_path):
    ens = EmotionEnsemble(
        {"hubert": str(models["hubert"])}, "cpu", python={"hubert": str(tmp_path / "no-python")}
    )
    with pytest.raises(ComponentError, match="cannot start hubert worker"):
        ens.start()


def test_worker_that_never_answers_times_out(tmp_path):
    from omnistory_eval.metrics.emotion import WorkerMember

    hang = tmp_path / "hang.sh"
    hang.write_text("#!/bin/sh\nsleep 30\n")
    hang.chmod(0o755)
    member = WorkerMember("hubert", "x", "cpu", str(hang), timeout_s=0.5)
    with pytest.raises(ComponentError, match="no answer within 0.5 s"):
        member.start()
    assert member._proc is None  # killed and reaped


def test_worker_protocol_reports_bad_items_and_keeps_serving(tmp_path):
    import io

    np.save(tmp_path / "ok.npy", np.zeros(10, np.float32))
    requests = io.StringIO(
        json.dumps({"id": 1, "npy": str(tmp_path / "missing.npy")})
        + "\n"
        + json.dumps({"id": 2, "npy": str(tmp_path / "ok.npy")})
        + "\n"
    )
    replies = io.StringIO()
    emotion_backends.serve(lambda w: (["neu"], [float(w.size)]), requests, replies)
    first, second = [json.loads(x) for x in replies.getvalue().splitlines()]
    assert first["id"] == 1 and "error" in first
    assert second == {"id": 2, "labels": ["neu"], "scores": [10.0]}


def test_unknown_emotion_backend_is_a_config_error():
    with pytest.raises(ValueError, match="unknown emotion backend"):
        EmotionEnsemble({"wav2vec2-er": "x"})


@pytest.mark.skipif(
    importlib.util.find_spec("speechbrain") is not None, reason="speechbrain is importable here"
)
def test_speechbrain_in_process_without_speechbrain_points_to_isolation():
    ens = EmotionEnsemble({"speechbrain": "speechbrain/emotion-recognition-wav2vec2-IEMOCAP"})
    with pytest.raises(ComponentError, match="emotion_python.speechbrain"):
        ens.start()


# --- SpeechBrain and emotion2vec output handling (documented shapes) -----------------------


def test_speechbrain_out_prob_is_canonicalized_from_log_posteriors():
    # classify_batch returns log posteriors in the label encoder's order neu, ang, hap, sad
    log_post = torch.log_softmax(torch.tensor([[0.1, 2.0, 0.3, -1.0]]), dim=-1)
    labels = list(emotion_backends.SPEECHBRAIN_FALLBACK_ORDER)
    dist = sm.canonical_distribution(labels, log_post.reshape(-1).tolist(), "speechbrain")
    assert max(dist, key=dist.get) == "angry"
    assert sum(dist.values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "result",
    [
        [
            {
                "key": "clip",
                "labels": [
                    "生气/angry",
                    "厌恶/disgusted",
                    "恐惧/fearful",
                    "开心/happy",
                    "中立/neutral",
                    "其他/other",
                    "难过/sad",
                    "吃惊/surprised",
                    "<unk>",
                ],
                "scores": [0.05, 0.01, 0.01, 0.7, 0.1, 0.03, 0.05, 0.03, 0.02],
            }
        ],
        [
            {
                "key": "clip",
                "labels": [
                    [
                        "生气/angry",
                        "厌恶/disgusted",
                        "恐惧/fearful",
                        "开心/happy",
                        "中立/neutral",
                        "其他/other",
                        "难过/sad",
                        "吃惊/surprised",
                        "<unk>",
                    ]
                ],
                "scores": [np.array([0.05, 0.01, 0.01, 0.7, 0.1, 0.03, 0.05, 0.03, 0.02])],
            }
        ],
        [{"key": "clip", "scores": [0.05, 0.01, 0.01, 0.7, 0.1, 0.03, 0.05, 0.03, 0.02]}],
    ],
)
def test_emotion2vec_outputs_parse_and_canonicalize(result):
    labels, scores = emotion_backends.parse_emotion2vec(result)
    dist = sm.canonical_distribution(labels, scores, "emotion2vec", "never")
    assert dist["happy"] == pytest.approx(0.7 / 0.9)
    assert dist["neutral"] == pytest.approx(0.1 / 0.9)


def test_emotion2vec_unpairable_output_is_an_error():
    with pytest.raises(RuntimeError, match="cannot pair"):
        emotion_backends.parse_emotion2vec([{"labels": ["a", "b"], "scores": [1.0]}])


# --- the speech_meta metric ----------------------------------------------------------------


def test_paper_defaults_and_checkpoints():
    m = SpeechMetaMetric()
    assert m.criteria == ("emotion", "speed", "pitch", "gender")
    assert SpeechMetaMetric.checkpoints({}) == [
        "openai/whisper-large-v3",
        "audeering/wav2vec2-large-robust-24-ft-age-gender",
        "speechbrain/emotion-recognition-wav2vec2-IEMOCAP",
        "superb/hubert-large-superb-er",
        "iic/emotion2vec_plus_large",
    ]
    assert m.thresholds == sm.Thresholds()


def test_scores_are_exact_matches_of_the_predicted_labels(batch_results):
    _, results = batch_results
    for res in results:
        assert res.status == "ok"
        pred = res.detail["predicted"]
        assert set(res.scores) == set(sm.FIELDS)
        for field in sm.FIELDS:
            assert res.scores[field] == float(
                sm.normalize_label(pred[field]) == sm.normalize_label(REF[field])
            )
        # pitch and speed follow the pure rules from the measurements in the detail
        assert pred["pitch"] == sm.pitch_label(res.detail["median_f0_hz"], pred["gender"])
        assert pred["speed"] == sm.speed_label(res.detail["units_per_second"])
        assert pred["emotion"] in sm.CANONICAL_EMOTIONS and pred["gender"] in ("female", "male")
        assert res.detail["asr_num_beams"] == 1
        json.dumps(res.detail)
    assert results[0].detail["median_f0_hz"] == pytest.approx(110.0, rel=0.03)
    assert results[1].detail["median_f0_hz"] == pytest.approx(230.0, rel=0.03)
    assert results[1].detail["gender_windows"] == 2


def test_batch_equals_one_by_one(metric, batch_results):
    items, together = batch_results
    alone = [metric.run_batch([i])[0] for i in items]
    for a, b in zip(together, alone, strict=True):
        assert a.scores == b.scores
        assert a.detail["predicted"] == b.detail["predicted"]


def test_undecodable_audio_is_invalid_and_bad_reference_is_an_error(metric, wavs):
    no_gender = {k: v for k, v in REF.items() if k != "gender"}
    broken, bad_ref, good = metric.run_batch(
        [
            {"candidate_speech": wavs["broken"], "reference_speech": REF},
            {"candidate_speech": wavs["low_short"], "reference_speech": no_gender},
            {"candidate_speech": wavs["low_short"], "reference_speech": REF},
        ]
    )
    assert broken.status == "invalid" and broken.scores == dict.fromkeys(sm.FIELDS)
    assert "broken.wav" in broken.detail["error"]
    assert isinstance(bad_ref, ValueError) and "reference_speech.gender" in str(bad_ref)
    assert good.status == "ok"


class _Failing:
    """A classifier stand-in that always fails (to test the metric's failure policy)."""

    def transcribe(self, waves):
        raise RuntimeError("asr exploded")

    def predict(self, waves):
        raise RuntimeError("gender exploded")


def test_failed_classifier_invalidates_only_its_criterion(models, wavs):
    m = SpeechMetaMetric(**tiny_speech_meta_params(models))
    m.load()
    m._asr = _Failing()
    (res,) = m.run_batch([{"candidate_speech": wavs["high_long"], "reference_speech": REF}])
    assert res.status == "ok" and res.scores["speed"] is None
    assert all(res.scores[f] is not None for f in ("emotion", "pitch", "gender"))
    assert "asr exploded" in res.detail["errors"]["speed"]

    m._gender = _Failing()
    (res,) = m.run_batch([{"candidate_speech": wavs["high_long"], "reference_speech": REF}])
    assert res.scores["gender"] is None and res.scores["speed"] is None
    # without a gender, pitch uses the gender-unknown thresholds (145/220 Hz): 230 Hz is high
    assert res.detail["predicted"]["pitch"] == "high"
    assert res.scores["pitch"] == 0.0
    m.unload()


def test_calibration_changes_labels_and_cache_identity(models, wavs, tmp_path):
    cal = tmp_path / "cal.json"
    cal.write_text(
        json.dumps(
            {
                "pitch_female_normal_high": 200,
                "pitch_male_normal_high": 200,
                "pitch_unknown_normal_high": 200,
            }
        )
    )
    default = SpeechMetaMetric(**tiny_speech_meta_params(models))
    calibrated = SpeechMetaMetric(**tiny_speech_meta_params(models), calibration=str(cal))
    assert "calibration" not in calibrated.output_params()
    assert calibrated.output_params()["thresholds"]["pitch_male_normal_high"] == 200.0
    assert default.output_params() != calibrated.output_params()
    calibrated.load()
    (res,) = calibrated.run_batch(
        [{"candidate_speech": wavs["high_long"], "reference_speech": REF}]
    )
    assert res.detail["predicted"]["pitch"] == "high"  # 230 Hz > 200 Hz for every gender


def test_bad_calibration_path_fails_at_construction(models, tmp_path):
    with pytest.raises(ValueError, match="nope.json: cannot read calibration file"):
        SpeechMetaMetric(**tiny_speech_meta_params(models), calibration=str(tmp_path / "nope.json"))


def test_missing_whisper_checkpoint_is_skipped(models, tmp_path):
    params = {**tiny_speech_meta_params(models), "whisper_model": str(tmp_path / "no-whisper")}
    with pytest.raises(ComponentError, match="^skipped: .*no-whisper not available offline"):
        SpeechMetaMetric(**params).load()


def test_detail_numbers_are_finite_or_none(batch_results):
    for res in batch_results[1]:
        for key in ("median_f0_hz", "units_per_second"):
            value = res.detail[key]
            assert value is None or math.isfinite(value)


# --- the full paper ensemble through isolated workers (needs a SpeechBrain + funasr python) ---

ROOT = Path(__file__).resolve().parents[2]
SPEECH_PYTHON = os.environ.get("OMNISTORY_SPEECH_PYTHON") or str(ROOT / ".venvs/tts/bin/python")


@pytest.mark.slow
@pytest.mark.tts_env
# where the test command built the environment (OMNISTORY_REQUIRE_REAL=1) a missing one fails
@pytest.mark.skipif(
    not Path(SPEECH_PYTHON).exists() and os.environ.get("OMNISTORY_REQUIRE_REAL") != "1",
    reason="no interpreter with speechbrain+funasr (set OMNISTORY_SPEECH_PYTHON)",
)
def test_three_member_ensemble_with_speechbrain_and_emotion2vec_workers(models, wavs, tmp_path):
    build = subprocess.run(
        [
            SPEECH_PYTHON,
            "-c",
            "import sys; from omnistory_testkit import metric_checkpoints as t;"
            "t.build_speechbrain_iemocap_standin(sys.argv[1]);"
            " t.build_tiny_emotion2vec(sys.argv[2])",
            str(tmp_path / "sb"),
            str(tmp_path / "e2v"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert build.returncode == 0, build.stderr[-2000:]
    members = {
        "speechbrain": str(tmp_path / "sb"),
        "hubert": str(models["hubert"]),
        "emotion2vec": str(tmp_path / "e2v"),
    }
    params = {
        **tiny_speech_meta_params(models),
        "emotion_models": members,
        "emotion_python": {"speechbrain": SPEECH_PYTHON, "emotion2vec": SPEECH_PYTHON},
    }
    m = SpeechMetaMetric(**params)
    m.load()
    try:
        results = m.run_batch(
            [
                {"candidate_speech": wavs[n], "reference_speech": REF}
                for n in ("low_short", "high_long")
            ]
        )
    finally:
        m.unload()
    for res in results:
        assert res.status == "ok" and res.scores["emotion"] in (0.0, 1.0)
        dists = res.detail["emotion_members"]
        assert list(dists) == ["speechbrain", "hubert", "emotion2vec"]
        for dist in dists.values():
            assert sum(dist.values()) == pytest.approx(1.0)
        # SpeechBrain's log posteriors were exponentiated, not clipped to a uniform distribution
        assert max(dists["speechbrain"].values()) > 0.25 + 1e-6
        mean = {k: sum(d[k] for d in dists.values()) / 3 for k in sm.CANONICAL_EMOTIONS}
        assert res.detail["emotion_probs"] == pytest.approx(mean, abs=1e-9)
        assert res.detail["predicted"]["emotion"] == sm.ensemble_emotion(list(dists.values()))[0]
