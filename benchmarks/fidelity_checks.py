"""Measurements behind docs/evaluation.md's "Fidelity" section (CPU, offline, two minutes).

    python benchmarks/fidelity_checks.py [--json OUT.json]

1. Whisper input, file path (the paper, ``asr_input=path``) vs decoded array (``asr_input=array``).
   eSpeak NG (the built-in TTS) speaks a 23-word sentence at rates around the speed thresholds
   (2.6 and 4.7 words/s); each clip is written as 16-bit PCM WAV at 16, 22.05 and 24 kHz.  For every
   file it compares what the two code paths hand to Whisper: the pipeline's own ffmpeg decode of the
   path (``transformers.pipelines.audio_utils.ffmpeg_read``, what ``pipeline(path)`` calls) and
   ``load_speech``'s librosa decode.  Reported per file: the largest sample difference, the largest
   log-mel feature difference (Whisper's feature extractor), the speed label of the energy fallback
   with the known transcript on each decode, and whether a randomly initialised one-layer Whisper
   (real weights are not available offline) returns the same transcript and word timestamps, hence
   the same speed label, through ``WhisperWordTimestamps`` given the path or the array.

   What this proves: where the two decodes are sample-identical, every Whisper checkpoint sees the
   same input, so the choice cannot change any label.  Where they differ (resampled files), it
   gives the size of the difference and shows the labels of the energy measure; it does not show
   what whisper-large-v3's word timestamps would do with that difference.

2. SpeechBrain scores: probabilities (``speechbrain_log_scores=auto``, the paper's "normalized
   probability distributions are averaged") vs clipped log posteriors (``never``, the public
   harness).  SpeechBrain's ``classify_batch`` returns log posteriors (all <= 0), so clipping
   makes them all 0 and SpeechBrain's distribution uniform: the ensemble label is then decided by
   the other two recognizers alone.  A constructed case where the label changes, and the share of
   changed labels over random posteriors (Dirichlet(1) for each recognizer, seed 0).
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path
from typing import Any

SENTENCE = (
    "The little fox ran across the quiet field and stopped beside the old stone wall "
    "where the morning light was warm and bright"
)
WPM = (105, 115, 125, 135, 175, 215, 225, 235, 245)
RATES_HZ = (16_000, 22_050, 24_000)


def _synthesize(wpm: int) -> tuple[Any, int]:
    from omnistory_core.builtin import espeak_tts

    samples, rate = espeak_tts.synthesize(SENTENCE, "en-us+m3", {espeak_tts._PARAM_RATE: wpm})
    return samples, rate


def _write(path: Path, samples: Any, rate: int, target: int) -> None:
    import numpy as np
    import soundfile as sf
    import soxr

    wave = samples.astype(np.float32) / 32768.0
    if target != rate:
        wave = soxr.resample(wave, rate, target)
    sf.write(path, wave, target, subtype="PCM_16")


def whisper_input_check(workdir: Path) -> list[dict[str, Any]]:
    import numpy as np
    from omnistory_eval.metrics.asr import WhisperWordTimestamps
    from omnistory_eval.speech_analysis import (
        SAMPLE_RATE,
        load_speech,
        speaking_rate,
        speed_label,
    )
    from omnistory_testkit.metric_checkpoints import build_tiny_whisper
    from transformers import WhisperFeatureExtractor
    from transformers.pipelines.audio_utils import ffmpeg_read

    features = WhisperFeatureExtractor(feature_size=128)  # whisper-large-v3's 128 mel bins
    asr = WhisperWordTimestamps(str(build_tiny_whisper(workdir / "whisper")), "cpu", num_beams=1)
    asr.load()
    rows = []
    for wpm in WPM:
        samples, rate = _synthesize(wpm)
        for target in RATES_HZ:
            path = workdir / f"wpm{wpm}_{target}.wav"
            _write(path, samples, rate, target)
            by_path = ffmpeg_read(path.read_bytes(), SAMPLE_RATE)
            full, trimmed = load_speech(path)
            n = min(by_path.size, full.size)
            sample_diff = float(np.max(np.abs(by_path[:n] - full[:n]))) if n else math.inf
            mel = [
                features(x, sampling_rate=SAMPLE_RATE, return_tensors="np").input_features
                for x in (by_path, full)
            ]
            mel_diff = float(np.max(np.abs(mel[0] - mel[1])))
            energy = {}
            for name, wave in (("path", by_path), ("array", full)):
                from omnistory_eval.speech_analysis import trim_silence

                rate_est = speaking_rate(SENTENCE, None, trim_silence(wave), SAMPLE_RATE)
                energy[name] = rate_est.units_per_second
            t_path, t_array = (asr.transcribe([x])[0] for x in (str(path), full))
            same = (t_path.text, t_path.chunks) == (t_array.text, t_array.chunks)
            whisper_rates = [
                speaking_rate(t.text, t.chunks, trimmed, SAMPLE_RATE).units_per_second
                for t in (t_path, t_array)
            ]
            rows.append(
                {
                    "wpm": wpm,
                    "file_hz": target,
                    "samples": [int(by_path.size), int(full.size)],
                    "max_sample_diff": sample_diff,
                    "max_logmel_diff": mel_diff,
                    "energy_rate": [energy["path"], energy["array"]],
                    "energy_label": [speed_label(energy["path"]), speed_label(energy["array"])],
                    "tiny_whisper_identical": same,
                    "tiny_whisper_rate": whisper_rates,
                    "tiny_whisper_label": [speed_label(r) for r in whisper_rates],
                }
            )
    return rows


def speechbrain_check(draws: int = 20_000, seed: int = 0) -> dict[str, Any]:
    import numpy as np
    from omnistory_eval.speech_analysis import (
        EMOTION_SOURCE_LABELS,
        canonical_distribution,
        ensemble_emotion,
    )

    def label(outputs: dict[str, list[float]], mode: str) -> str:
        dists = [
            canonical_distribution(
                EMOTION_SOURCE_LABELS[b], s, b, mode if b == "speechbrain" else "never"
            )
            for b, s in outputs.items()
        ]
        return ensemble_emotion(dists)[0]

    # SpeechBrain is sure of "ang" (log posteriors); HuBERT and emotion2vec lean to neutral
    constructed = {
        "speechbrain": [math.log(p) for p in (0.05, 0.85, 0.05, 0.05)],  # neu ang hap sad
        "hubert": [0.45, 0.05, 0.40, 0.10],  # neu hap ang sad
        "emotion2vec": [0.35, 0.0, 0.0, 0.05, 0.45, 0.0, 0.15, 0.0, 0.0],
    }
    case = {mode: label(constructed, mode) for mode in ("auto", "never")}
    rng = np.random.default_rng(seed)
    changed = 0
    for _ in range(draws):
        outputs = {
            "speechbrain": np.log(rng.dirichlet(np.ones(4))).tolist(),
            "hubert": rng.dirichlet(np.ones(4)).tolist(),
            "emotion2vec": rng.dirichlet(np.ones(9)).tolist(),
        }
        changed += label(outputs, "auto") != label(outputs, "never")
    return {"constructed": case, "draws": draws, "seed": seed, "changed": changed}


def _rate(value: float | None) -> str:
    return "none" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="omnistory-fidelity-") as tmp:
        rows = whisper_input_check(Path(tmp))
    print("Whisper input: file path (ffmpeg decode) vs librosa array")
    print(
        "| wpm | file Hz | max |Δ sample| | max |Δ log-mel| | energy rate path/array (label) "
        "| tiny Whisper identical (rate path/array: labels) |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        rp, ra = r["energy_rate"]
        print(
            f"| {r['wpm']} | {r['file_hz']} | {r['max_sample_diff']:.2e} | "
            f"{r['max_logmel_diff']:.2e} | {rp:.3f}/{ra:.3f} "
            f"({'/'.join(r['energy_label'])}) | {r['tiny_whisper_identical']} "
            f"({'/'.join(_rate(x) for x in r['tiny_whisper_rate'])}: "
            f"{'/'.join(r['tiny_whisper_label'])}) |"
        )
    sb = speechbrain_check()
    print(
        "\nSpeechBrain scores: constructed case label auto={auto}, never={never}; random "
        "posteriors: {changed} of {draws} ensemble labels change (seed {seed})".format(
            **sb["constructed"], changed=sb["changed"], draws=sb["draws"], seed=sb["seed"]
        )
    )
    if args.json:
        args.json.write_text(json.dumps({"whisper_input": rows, "speechbrain": sb}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
