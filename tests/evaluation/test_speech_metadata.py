"""The pure rules of the speech metadata metric (paper App. E.2), at and around every boundary."""

from __future__ import annotations

import importlib.util
import json
import math

import numpy as np
import pytest
from omnistory_eval import speech_analysis as sm
from omnistory_testkit.metric_checkpoints import synthetic_voice, write_wav

needs_librosa = pytest.mark.skipif(
    importlib.util.find_spec("librosa") is None,
    reason="librosa is not installed (pip install librosa)",
)


# --- speed ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "label"),
    [
        (0.0, "slow"),
        (2.6 - 1e-6, "slow"),
        (2.6, "normal"),
        (2.6 + 1e-6, "normal"),
        (3.5, "normal"),
        (4.7 - 1e-6, "normal"),
        (4.7, "normal"),
        (4.7 + 1e-6, "fast"),
        (12.0, "fast"),
    ],
)
def test_speed_label_boundaries(rate, label):
    assert sm.speed_label(rate) == label


@pytest.mark.parametrize("rate", [None, math.nan, math.inf])
def test_speed_label_without_a_rate_is_normal(rate):
    assert sm.speed_label(rate) == "normal"


# --- pitch ---------------------------------------------------------------------------------

PITCH_BOUNDS = {"male": (110.0, 170.0), "female": (165.0, 255.0), None: (145.0, 220.0)}


@pytest.mark.parametrize("gender", ["male", "female", None])
def test_pitch_label_boundaries_by_gender(gender):
    low, high = PITCH_BOUNDS[gender]
    assert sm.pitch_label(low - 1e-6, gender) == "low"
    assert sm.pitch_label(low, gender) == "normal"
    assert sm.pitch_label(low + 1e-6, gender) == "normal"
    assert sm.pitch_label((low + high) / 2, gender) == "normal"
    assert sm.pitch_label(high - 1e-6, gender) == "normal"
    assert sm.pitch_label(high, gender) == "normal"
    assert sm.pitch_label(high + 1e-6, gender) == "high"


def test_pitch_thresholds_really_depend_on_gender():
    # 160 Hz: normal for a male voice, low for a female one, normal when gender is unknown
    assert sm.pitch_label(160.0, "male") == "normal"
    assert sm.pitch_label(160.0, "female") == "low"
    assert sm.pitch_label(160.0, None) == "normal"
    # 200 Hz: high for male, normal for female
    assert sm.pitch_label(200.0, "male") == "high"
    assert sm.pitch_label(200.0, "female") == "normal"


@pytest.mark.parametrize("gender", [" Male ", "M", "man"])
def test_pitch_label_accepts_gender_spellings(gender):
    assert sm.pitch_label(105.0, gender) == "low"


@pytest.mark.parametrize("gender", ["child", "", "unknown"])
def test_unrecognized_gender_uses_unknown_thresholds(gender):
    assert sm.pitch_label(144.0, gender) == "low"
    assert sm.pitch_label(221.0, gender) == "high"


@pytest.mark.parametrize("f0", [None, math.nan])
def test_pitch_without_estimate_is_normal(f0):
    assert sm.pitch_label(f0, "female") == "normal"


# --- thresholds / calibration --------------------------------------------------------------


def test_thresholds_defaults_are_the_paper_values():
    t = sm.Thresholds()
    assert (t.speed_slow_normal, t.speed_normal_fast) == (2.6, 4.7)
    assert t.pitch_bounds("male") == (110.0, 170.0)
    assert t.pitch_bounds("female") == (165.0, 255.0)
    assert t.pitch_bounds(None) == (145.0, 220.0)


def test_calibration_file_changes_the_rules(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"speed_slow_normal": 3.0, "pitch_male_normal_high": 150}))
    t = sm.Thresholds.from_json(path)
    assert t.speed_slow_normal == 3.0 and t.speed_normal_fast == 4.7
    assert sm.speed_label(2.8, t) == "slow"
    assert sm.speed_label(2.8) == "normal"
    assert sm.pitch_label(160.0, "male", t) == "high"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"speed_slow": 2.0}', "unknown calibration field"),
        ('{"speed_slow_normal": "fast"}', "'speed_slow_normal' must be a number"),
        ('{"speed_slow_normal": 5.0}', "speed_slow_normal <= speed_normal_fast"),
        ("[1, 2]", "must be a JSON object"),
        ("{not json", "invalid JSON"),
    ],
)
def test_bad_calibration_file_names_file_and_field(tmp_path, content, message):
    path = tmp_path / "cal.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="cal.json") as err:
        sm.Thresholds.from_json(path)
    assert message in str(err.value)


# --- median F0 and the pyin -> yin -> None chain -------------------------------------------


@needs_librosa
@pytest.mark.parametrize("f0", [95.0, 140.0, 200.0, 300.0])
def test_median_f0_on_synthetic_voices_within_3_percent(f0):
    estimate = sm.median_f0(synthetic_voice(f0, seconds=1.0), 16000)
    assert estimate is not None
    assert abs(estimate - f0) / f0 < 0.03


@needs_librosa
def test_pyin_is_the_first_method():
    est = sm.estimate_f0(synthetic_voice(200.0, seconds=1.0), 16000)
    assert est.method == "pyin" and est.estimates >= sm.MIN_F0_ESTIMATES


@needs_librosa
def test_yin_fallback_when_pyin_finds_no_voicing():
    # digital silence: pyin marks every frame unvoiced (NaN); yin still returns positive values
    silence = np.zeros(16000, dtype=np.float32)
    import librosa

    f0_pyin, _, _ = librosa.pyin(silence, sr=16000, fmin=sm.F0_FMIN_HZ, fmax=sm.F0_FMAX_HZ)
    assert np.isfinite(f0_pyin).sum() < sm.MIN_F0_ESTIMATES
    est = sm.estimate_f0(silence, 16000)
    assert est.method == "yin"
    assert est.median_hz is not None and est.median_hz > 0


@needs_librosa
def test_no_estimate_when_both_methods_have_too_few_frames():
    short = synthetic_voice(200.0, seconds=0.01)  # one analysis frame
    est = sm.estimate_f0(short, 16000)
    assert est == sm.F0Estimate(None, None, est.estimates) and est.estimates < 5
    assert sm.pitch_label(sm.median_f0(short, 16000), "male") == "normal"


@needs_librosa
def test_no_estimate_when_both_methods_reject_the_signal():
    broken = np.full(4000, np.nan, dtype=np.float32)
    assert sm.estimate_f0(broken, 16000) == sm.F0Estimate(None, None, 0)
    assert sm.median_f0(np.zeros(0, dtype=np.float32), 16000) is None


# --- speaking rate -------------------------------------------------------------------------


def _chunks(*words):
    return [{"text": t, "timestamp": ts} for t, ts in words]


def test_rate_from_word_timestamps_uses_first_start_to_last_end():
    chunks = _chunks((" Look", (0.5, 0.8)), (" a", (0.8, 0.9)), (" boat", (1.0, 1.5)))
    est = sm.speaking_rate("Look a boat", chunks, np.zeros(16000, np.float32), 16000)
    assert est.method == "word_timestamps" and est.units == 3
    assert est.units_per_second == pytest.approx(3 / 1.0)


def test_unusable_word_chunks_are_ignored():
    chunks = _chunks(
        (" ok", (0.0, 1.0)),
        ("  ", (1.0, 2.0)),  # empty text
        (" none", (1.0, None)),  # open end
        (" zero", (2.0, 2.0)),  # end <= start
        (" inf", (2.0, math.inf)),
        (" bad", "1.0-2.0"),
    )
    assert sm.timestamped_words(chunks) == [(0.0, 1.0)]


@needs_librosa
def test_energy_fallback_without_word_timestamps():
    wave = synthetic_voice(150.0, seconds=2.0, syllables_per_second=2.0)
    duration = sm.energy_speech_duration(wave, 16000)
    assert 0.6 < duration < 1.6  # about half the signal is gated off
    est = sm.speaking_rate("one two three four", [], wave, 16000)
    assert est.method == "energy_fallback" and est.units == 4
    assert est.units_per_second == pytest.approx(4 / duration)


@needs_librosa
def test_no_rate_without_transcript_units():
    wave = synthetic_voice(150.0, seconds=1.0)
    est = sm.speaking_rate("   ", None, wave, 16000)
    assert est.units_per_second is None and est.method is None
    assert sm.speed_label(est.units_per_second) == "normal"


def test_token_like_count_splits_on_whitespace():
    assert sm.token_like_count("Look,  a boat!\nsaid Mina.") == 5
    assert sm.token_like_count("") == 0


# --- gender windows ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "windows"),
    [
        (1.0, [(0, 16000)]),
        (3.0, [(0, 48000)]),
        (3.5, [(0, 48000)]),  # trailing partial window is not scored
        (4.5, [(0, 48000), (24000, 72000)]),
        (6.0, [(0, 48000), (24000, 72000), (48000, 96000)]),
    ],
)
def test_gender_windows_three_seconds_hop_one_and_a_half(seconds, windows):
    assert sm.gender_windows(int(seconds * 16000)) == windows


def test_gender_windows_of_nothing():
    assert sm.gender_windows(0) == []


def test_binarize_gender_tie_is_male():
    assert sm.binarize_gender(0.6, 0.3) == "female"
    assert sm.binarize_gender(0.3, 0.6) == "male"
    assert sm.binarize_gender(0.4, 0.4) == "male"


# --- emotion canonicalization --------------------------------------------------------------


def test_speechbrain_label_set_and_log_posteriors():
    labels = ["neu", "ang", "hap", "sad"]
    logp = [math.log(p) for p in (0.1, 0.2, 0.6, 0.1)]
    dist = sm.canonical_distribution(labels, logp, "speechbrain")
    assert dist["happy"] == pytest.approx(0.6) and dist["angry"] == pytest.approx(0.2)
    assert sum(dist.values()) == pytest.approx(1.0)


def test_speechbrain_clip_mode_reproduces_the_harness():
    logp = [math.log(p) for p in (0.1, 0.2, 0.6, 0.1)]
    dist = sm.canonical_distribution(["neu", "ang", "hap", "sad"], logp, "speechbrain", "never")
    assert all(v == pytest.approx(0.25) for v in dist.values())


def test_hubert_label_set_in_its_own_order():
    dist = sm.canonical_distribution(
        ["neu", "hap", "ang", "sad"], [0.1, 0.2, 0.3, 0.4], "hubert", "never"
    )
    assert dist == pytest.approx({"neutral": 0.1, "happy": 0.2, "sad": 0.4, "angry": 0.3})


def test_emotion2vec_bilingual_labels_extra_classes_dropped_and_renormalized():
    labels = [
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
    scores = [0.1, 0.1, 0.1, 0.2, 0.2, 0.1, 0.1, 0.05, 0.05]
    dist = sm.canonical_distribution(labels, scores, "emotion2vec", "never")
    assert dist == pytest.approx(
        {"neutral": 0.2 / 0.6, "happy": 0.2 / 0.6, "sad": 0.1 / 0.6, "angry": 0.1 / 0.6}
    )


@pytest.mark.parametrize(
    ("source", "labels"),
    [
        ("hubert", ["neutral", "happy", "angry", "sad"]),  # not superb's label set
        ("speechbrain", ["neu", "ang", "hap", "exc"]),
        ("emotion2vec", ["angry", "calm"]),
    ],
)
def test_labels_outside_a_source_set_are_errors(source, labels):
    with pytest.raises(ValueError, match=source):
        sm.canonical_distribution(labels, [0.25] * len(labels), source, "never")


def test_label_score_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="4 labels but 3 scores"):
        sm.canonical_distribution(["neu", "hap", "ang", "sad"], [0.1, 0.2, 0.7], "hubert")


def test_no_canonical_mass_gives_uniform():
    labels = [
        "angry",
        "disgusted",
        "fearful",
        "happy",
        "neutral",
        "other",
        "sad",
        "surprised",
        "unknown",
    ]
    dist = sm.canonical_distribution(
        labels, [0, 0.5, 0.5, 0, 0, 0, 0, 0, 0], "emotion2vec", "never"
    )
    assert dist == pytest.approx(dict.fromkeys(sm.CANONICAL_EMOTIONS, 0.25))


def test_as_probabilities_rejects_nan():
    with pytest.raises(ValueError):
        sm.as_probabilities([0.5, math.nan])


def test_ensemble_is_an_equal_weight_average():
    a = {"neutral": 0.7, "happy": 0.1, "sad": 0.1, "angry": 0.1}
    b = {"neutral": 0.0, "happy": 0.9, "sad": 0.05, "angry": 0.05}
    c = {"neutral": 0.0, "happy": 0.6, "sad": 0.4, "angry": 0.0}
    label, probs = sm.ensemble_emotion([a, b, c])
    assert label == "happy"
    assert probs["happy"] == pytest.approx(1.6 / 3)
    assert probs["neutral"] == pytest.approx(0.7 / 3)


def test_ensemble_tie_goes_to_the_first_canonical_label():
    label, _ = sm.ensemble_emotion([{"neutral": 0.0, "happy": 0.5, "sad": 0.5, "angry": 0.0}])
    assert label == "happy"
    label, _ = sm.ensemble_emotion([dict.fromkeys(sm.CANONICAL_EMOTIONS, 0.25)])
    assert label == "neutral"


# --- scoring -------------------------------------------------------------------------------


def test_field_matches_after_lowercase_and_strip():
    pred = {"emotion": "Happy", "speed": "normal ", "pitch": "low", "gender": None}
    ref = {"emotion": " happy", "speed": "NORMAL", "pitch": "high", "gender": "female"}
    assert sm.field_matches(pred, ref) == {"emotion": 1.0, "speed": 1.0, "pitch": 0.0}


def test_metadata_accuracy_and_exact_match_need_all_four_fields():
    all_ok = dict.fromkeys(sm.FIELDS, 1.0)
    assert sm.metadata_accuracy(all_ok) == 1.0 and sm.exact_match(all_ok) == 1.0
    three = {**all_ok, "pitch": 0.0}
    assert sm.metadata_accuracy(three) == 0.75 and sm.exact_match(three) == 0.0
    none = dict.fromkeys(sm.FIELDS, 0.0)
    assert sm.metadata_accuracy(none) == 0.0  # a valid prediction matching nothing keeps zero
    missing = {**all_ok, "emotion": None}
    assert sm.metadata_accuracy(missing) is None and sm.exact_match(missing) is None


# --- audio loading -------------------------------------------------------------------------


@needs_librosa
def test_load_speech_resamples_to_16k_mono_and_trims(tmp_path):
    sr = 22050
    voice = synthetic_voice(180.0, seconds=1.0, sample_rate=sr)
    padded = np.concatenate([np.zeros(sr // 2, np.float32), voice, np.zeros(sr // 2, np.float32)])
    stereo = np.stack([padded, padded], axis=1)
    path = tmp_path / "clip.wav"
    import soundfile as sf

    sf.write(path, stereo, sr, subtype="FLOAT")
    full, trimmed = sm.load_speech(path)
    assert full.ndim == 1 and abs(len(full) - 2 * 16000) <= 2
    assert 0.9 * 16000 < len(trimmed) < 1.2 * 16000  # the half-second pads are gone
    assert sm.median_f0(trimmed, 16000) == pytest.approx(180.0, rel=0.03)


@needs_librosa
def test_load_speech_errors_name_the_file(tmp_path):
    bad = tmp_path / "not_audio.wav"
    bad.write_text("this is not a wav file")
    with pytest.raises(ValueError, match="not_audio.wav: cannot decode audio"):
        sm.load_speech(bad)
    empty = write_wav(tmp_path / "empty.wav", np.zeros(0, np.float32))
    with pytest.raises(ValueError, match="empty.wav: audio file has no samples"):
        sm.load_speech(empty)


@needs_librosa
def test_all_silent_audio_is_not_trimmed_to_nothing():
    silence = np.zeros(8000, np.float32)
    assert len(sm.trim_silence(silence)) == 8000
    assert sm.energy_speech_duration(silence, 16000) == pytest.approx(0.5)
