"""Measure tts=piper with the installed voice on the bundled demo's 10 target utterances: load
time, real-time factor, and the median F0 (librosa pYIN, as the benchmark's speech metric) and
speaking rate per label.  Needs the `voices` extra and librosa.

    python plugins/omnistory-piper/scripts/measure.py
"""

from __future__ import annotations

import time
from importlib.resources import files

import librosa
import numpy as np
import pyarrow.parquet as pq
from omnistory_piper.expert import PiperTTS

LINE = "I can't move! I'm stuck in these branches, please help me."


def median_f0(samples: np.ndarray, rate: int) -> float:
    y = librosa.resample(samples, orig_sr=rate, target_sr=16000)
    f0, _, _ = librosa.pyin(y, fmin=65.41, fmax=2093.0, sr=16000)
    f0 = f0[np.isfinite(f0)]
    return float(np.median(f0)) if f0.size >= 5 else float("nan")


def main() -> None:
    demo = files("omnistory_core") / "data" / "demo" / "data" / "omni_storybench.parquet"
    rows = pq.read_table(str(demo)).to_pylist()
    items = [
        {
            k: r[f"speech_{k}"]
            for k in ("utterance", "speaker", "emotion", "speed", "pitch", "gender")
        }
        for r in rows
    ]
    tts = PiperTTS(threads=2)
    start = time.perf_counter()
    tts.load()
    print(f"load {time.perf_counter() - start:.2f} s")
    tts.run_one(items[0])  # warm-up
    wall = audio = 0.0
    for item in items:
        start = time.perf_counter()
        out = tts.run_one(item)
        wall += time.perf_counter() - start
        audio += out.samples.size / out.sample_rate
    print(
        f"{len(items)} demo lines: {audio:.1f} s of audio in {wall:.2f} s, RTF {wall / audio:.3f}"
    )
    for gender in ("male", "female"):
        for pitch in ("low", "normal", "high"):
            out = tts.run_one({"utterance": LINE, "speaker": "X", "gender": gender, "pitch": pitch})
            print(f"{gender} {pitch}: median F0 {median_f0(out.samples, out.sample_rate):.0f} Hz")
    for speed in ("slow", "normal", "fast"):
        out = tts.run_one({"utterance": LINE, "speaker": "X", "gender": "male", "speed": speed})
        seconds = out.samples.size / out.sample_rate
        print(f"{speed}: {seconds:.2f} s, {len(LINE.split()) / seconds:.2f} words/s")


if __name__ == "__main__":
    main()
